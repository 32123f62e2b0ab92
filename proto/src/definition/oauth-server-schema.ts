/**
 * OAuth server definitions: raw admin JSON → normalised OAuthServerDefinition.
 * Endpoints use the API proxy schema (plus a required listen_path); `proxy.hosts` on an endpoint
 * is ignored, like every unknown member. Legacy jwt settings (`{"secret": k}`, or array elements
 * `{secret}`) become `{alg: "HS256", key: k}`. PEM parsing of keys is the compile stage's.
 */
import { z } from 'zod';
import { tryParseDuration, tryParseDurationUpTo } from '../duration.js';
import { isLoopbackHost } from '../loopback.js';
import { endpointSchema, HTTP_TOKEN, normalizeProxy } from './proxy-schema.js';
import { dropNulls, isPlainObject, parseOrThrow, validationError } from './field-path.js';
import { nameSchema } from './name.js';
import { JWKS_ALGS, JWT_ALGS, OAUTH_ENDPOINTS } from './types.js';
import type { IntrospectionSettings, JwksSettings, OAuthServerDefinition, ProxyDefinition, TokenStrategy } from './types.js';

export const MAX_LEEWAY_SECONDS = 3600;
const UINT32_MAX = 4_294_967_295;

const leewayError = `must be an integer from 0 to ${MAX_LEEWAY_SECONDS}`;
const ttlError = 'must be a positive integer (seconds)';
const algError = `must be one of ${JWT_ALGS.join(', ')}`;
export const MAX_AUDIENCES = 16;

/** An `iss` or `aud` value to compare with: URIs or plain identifiers, bounded, without control characters. */
const claimValueSchema = z
  .string({ error: 'must be a string' })
  .min(1, 'must not be empty')
  .max(1024, 'must be at most 1024 characters')
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the class names the control characters it refuses.
  .regex(/^[^\x00-\x1f\x7f]+$/, 'must not contain control characters');

export const serverSchema = z.object({
  name: nameSchema,
  // prefault: a missing oauth_endpoints reports `oauth_endpoints.token is required`.
  oauth_endpoints: z
    .object({
      token: endpointSchema,
      authorize: endpointSchema.optional(),
      introspect: endpointSchema.optional(),
      revoke: endpointSchema.optional(),
    })
    .prefault({} as never),
  token_strategy: z.object({
    name: z.enum(['jwt', 'storage', 'introspection'], {
      error: (iss) => (iss.input === undefined ? 'is required' : 'must be "jwt", "storage" or "introspection"'),
    }),
    settings: z.unknown().optional(),
    leeway: z.int({ error: leewayError }).min(0, leewayError).max(MAX_LEEWAY_SECONDS, leewayError).default(0),
    issuer: claimValueSchema.optional(),
    // [] checks nothing, like an absent list (the wire cannot tell them apart): stored as absent.
    audiences: z.preprocess(
      (v) => (Array.isArray(v) && v.length === 0 ? undefined : v),
      z
        .array(claimValueSchema)
        .max(MAX_AUDIENCES, `must have at most ${MAX_AUDIENCES} entries`)
        .transform((a) => [...new Set(a)])
        .optional(),
    ),
  }),
});

function legacyKey(v: unknown): unknown {
  return isPlainObject(v) && v.key === undefined && v.secret !== undefined ? { alg: v.alg ?? 'HS256', key: v.secret } : v;
}

export const jwtSettingsSchema = z.preprocess(
  (v) => (isPlainObject(v) ? [v] : v),
  z
    .array(
      z.preprocess(
        legacyKey,
        z.object({
          alg: z.enum(JWT_ALGS, { error: (iss) => (iss.input === undefined ? 'is required' : algError) }),
          key: z.string().min(1, 'is required'),
        }),
      ),
    )
    .min(1, 'must not be empty'),
);

const MAX_JWKS_URI_LENGTH = 2048;
const HOUR_MS = 3_600_000;

/** A duration string from `minMs` to `maxMs` (the message names both as written). */
export const durationIn = (minMs: number, maxMs: number, range: string) =>
  z.string({ error: `must be a duration from ${range}` }).refine((t) => (tryParseDurationUpTo(t, maxMs) ?? 0) >= minMs, `must be a duration from ${range}`);

/**
 * The JWKS form of jwt settings, told from Janus's key list by its `jwks_uri`. Plain http is refused unless
 * the host is loopback (the traffic never leaves the machine) or `allow_http` says so: a key set fetched in
 * the clear can be replaced by anyone on the path, who then signs any token.
 */
export const jwksSettingsSchema = z
  .object({
    jwks_uri: z
      .string({ error: (iss) => (iss.input === undefined ? 'is required' : 'must be a string') })
      .min(1, 'is required')
      .max(MAX_JWKS_URI_LENGTH, `must be at most ${MAX_JWKS_URI_LENGTH} characters`),
    algs: z
      .array(z.enum(JWKS_ALGS, { error: `must be one of ${JWKS_ALGS.join(', ')} (a JWKS holds public keys only)` }), {
        error: 'must be an array of algs',
      })
      .min(1, 'must not be empty')
      .transform((algs) => [...new Set(algs)])
      .default([...JWKS_ALGS]),
    cache_ttl: durationIn(1000, 24 * HOUR_MS, '"1s" to "24h"').default('5m'),
    timeout: durationIn(1, 60_000, '"1ms" to "60s"').default('2s'),
    cooldown: durationIn(1000, HOUR_MS, '"1s" to "1h"').default('30s'),
    max_stale: durationIn(1000, 7 * 24 * HOUR_MS, '"1s" to "168h"').default('24h'),
    allow_http: z.boolean({ error: 'must be a boolean' }).default(false),
  })
  .superRefine((s, ctx) => {
    const problem = jwksUriProblem(s.jwks_uri, s.allow_http);
    if (problem) ctx.addIssue({ code: 'custom', path: ['jwks_uri'], message: problem });
    const ttl = tryParseDurationUpTo(s.cache_ttl, Infinity);
    const stale = tryParseDurationUpTo(s.max_stale, Infinity);
    if (ttl !== null && stale !== null && stale < ttl) ctx.addIssue({ code: 'custom', path: ['max_stale'], message: 'must not be shorter than cache_ttl' });
  });

/** Why `uri` cannot be fetched for keys (or an OIDC issuer's discovery), or undefined. */
export function jwksUriProblem(uri: string, allowHttp: boolean): string | undefined {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return 'must be an absolute http(s) URL';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must be an absolute http(s) URL';
  if (url.username || url.password) return 'must not contain credentials';
  if (url.hash) return 'must not contain a fragment';
  if (url.protocol === 'http:' && !allowHttp && !isLoopbackHost(url.hostname)) {
    return 'must be https (http only for a loopback host, or with allow_http: true)';
  }
  return undefined;
}

export const storageSettingsSchema = z.preprocess(
  // The seed describes settings as an array: [] and [{...}] are accepted as the object form.
  (v) => (v === undefined || (Array.isArray(v) && v.length === 0) ? {} : Array.isArray(v) && v.length === 1 ? v[0] : v),
  z.object({ default_ttl: z.int({ error: ttlError }).min(1, ttlError).max(UINT32_MAX, ttlError).optional() }),
);

export const MAX_INTROSPECTION_TIMEOUT_MS = 60_000;
export const MAX_INTROSPECTION_CACHE_TTL = 86_400;
const cacheTtlError = `must be an integer from 0 to ${MAX_INTROSPECTION_CACHE_TTL} (seconds)`;

export const introspectionSettingsSchema = z.preprocess(
  (v) => (v === undefined ? {} : v),
  z
    .object({
      use_auth_header: z.boolean().default(false),
      auth_header_type: z.string().regex(HTTP_TOKEN, 'must be an authentication scheme such as "Bearer"').default('Bearer'),
      token_type_hint: z.string().regex(HTTP_TOKEN, 'must be a token type such as "access_token"').optional(),
      client_id: z
        .string()
        .min(1, 'must not be empty')
        .regex(/^[\x20-\x7e]+$/, 'must be printable ASCII')
        .optional(),
      client_secret: z
        .string()
        .regex(/^[\x20-\x7e]*$/, 'must be printable ASCII')
        .optional(),
      client_auth: z.enum(['basic', 'post'], { error: 'must be "basic" or "post"' }).default('basic'),
      timeout: z
        .string()
        .refine((t) => (tryParseDuration(t) ?? Infinity) <= MAX_INTROSPECTION_TIMEOUT_MS, 'must be a duration from "1ms" to "60s"')
        .default('2s'),
      cache_ttl: z.int({ error: cacheTtlError }).min(0, cacheTtlError).max(MAX_INTROSPECTION_CACHE_TTL, cacheTtlError).default(300),
    })
    .superRefine((c, ctx) => {
      if (c.client_secret !== undefined && c.client_id === undefined) {
        ctx.addIssue({ code: 'custom', path: ['client_id'], message: 'is required with client_secret' });
      }
      if (c.use_auth_header && c.client_id !== undefined && c.client_auth === 'basic') {
        ctx.addIssue({
          code: 'custom',
          path: ['client_auth'],
          message: 'must be "post" when use_auth_header is true (the token takes the Authorization header)',
        });
      }
    }),
);

/**
 * The introspection strategy calls `oauth_endpoints.introspect`'s targets itself, so that endpoint is
 * required and its targets must be plain URLs (no `{param}`: no client request to take values from).
 */
function checkIntrospectEndpoint(endpoints: { introspect?: { upstreams?: { targets?: { target: string }[] } } }): void {
  const introspect = endpoints.introspect;
  if (!introspect) throw validationError(['oauth_endpoints', 'introspect'], 'is required when token_strategy.name is "introspection"');
  introspect.upstreams?.targets?.forEach((t, i) => {
    if (/[{}]/.test(t.target)) {
      throw validationError(
        ['oauth_endpoints', 'introspect', 'upstreams', 'targets', i, 'target'],
        'must not contain placeholders when token_strategy.name is "introspection"',
      );
    }
  });
}

export function parseOAuthServer(input: unknown): OAuthServerDefinition {
  if (!isPlainObject(input)) throw validationError([], 'definition must be a JSON object');
  const parsed = parseOrThrow(serverSchema, dropNulls(input));

  const { name: strategy, settings, leeway, issuer, audiences } = parsed.token_strategy;
  const base = ['token_strategy', 'settings'];
  // Stored only when given, so servers without them keep their hash.
  const checks = dropUndefined({ issuer, audiences });
  let token_strategy: TokenStrategy;
  if (strategy === 'jwt') {
    if (isPlainObject(settings) && settings.jwks_uri !== undefined) {
      token_strategy = { name: 'jwt', settings: parseOrThrow(jwksSettingsSchema, settings, base) as JwksSettings, leeway, ...checks };
    } else {
      const keys = parseOrThrow(jwtSettingsSchema, settings, base);
      token_strategy = { name: 'jwt', settings: keys.map((k) => ({ alg: k.alg, key: k.key })), leeway, ...checks };
    }
  } else if (strategy === 'introspection') {
    checkIntrospectEndpoint(parsed.oauth_endpoints);
    const s = parseOrThrow(introspectionSettingsSchema, settings, base) as IntrospectionSettings;
    token_strategy = { name: 'introspection', settings: dropUndefined(s), leeway, ...checks };
  } else {
    // A stored token is opaque to the gateway: there is no iss or aud to compare.
    for (const field of ['issuer', 'audiences'] as const) {
      if (checks[field] !== undefined) throw validationError(['token_strategy', field], 'is only checked by the jwt and introspection strategies');
    }
    const { default_ttl } = parseOrThrow(storageSettingsSchema, settings, base);
    token_strategy = { name: 'storage', settings: default_ttl === undefined ? {} : { default_ttl }, leeway };
  }

  const endpoints: Partial<Record<(typeof OAUTH_ENDPOINTS)[number], ProxyDefinition>> = {};
  for (const name of OAUTH_ENDPOINTS) {
    const raw = parsed.oauth_endpoints[name];
    if (raw) endpoints[name] = normalizeProxy(raw);
  }
  return {
    name: parsed.name,
    oauth_endpoints: { ...endpoints, token: normalizeProxy(parsed.oauth_endpoints.token) },
    token_strategy,
  };
}

/** Optional members left out rather than stored as undefined (what is shown is what is stored). */
function dropUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}
