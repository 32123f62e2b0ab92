/**
 * The proxy object, shared by API definitions and every OAuth server endpoint (one schema,
 * one normaliser). Only shape and simple syntax are checked here; listen_path parameter
 * syntax, regex compilation and target URLs are the compile stage's (proto/src/compile).
 */
import { z } from 'zod';
import { tryParseDuration } from '../duration.js';
import type { Balancing, HashOn, ProxyDefinition } from './types.js';
import { HOP_BY_HOP_HEADERS, HTTP_TOKEN, headerValueSchema } from '../http-fields.js';

export const DEFAULT_DIAL_TIMEOUT = '30s';
export const DEFAULT_RESPONSE_HEADER_TIMEOUT = '60s';
export const MAX_TARGET_WEIGHT = 1000;

export { HTTP_TOKEN } from '../http-fields.js';

const byCodeUnits = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

export const hostSchema = z
  .string()
  .min(1, 'must not be empty')
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the class names the control characters it refuses.
  .regex(/^[^\s\u0000-\u001f\u007f]+$/, 'must not contain whitespace');

const durationSchema = (fallback: string) =>
  z
    .string()
    .refine((s) => tryParseDuration(s) !== null, 'is not a valid duration')
    .default(fallback);

const balancingSchema = z
  .string()
  .optional()
  .transform((s, ctx): Balancing => {
    const v = (s ?? '').toLowerCase();
    if (v === '' || v === 'roundrobin' || v === 'rr') return 'roundrobin';
    if (v === 'weight' || v === 'least_conn' || v === 'hash') return v;
    ctx.issues.push({ code: 'custom', input: s, message: 'must be "roundrobin" (alias "rr"), "weight", "least_conn" or "hash"' });
    return z.NEVER;
  });

const weightError = `must be an integer from 1 to ${MAX_TARGET_WEIGHT}`;

const targetSchema = z.object({
  target: z.string().min(1, 'is required'),
  weight: z.int({ error: weightError }).min(1, weightError).max(MAX_TARGET_WEIGHT, weightError).default(1),
  // Widens what placeholders in the target's host may form (proto/src/compile/target.ts); compiled there. "" (the
  // wire's default) is stored as absent.
  host_pattern: z.string('must be a string').max(256, 'must be at most 256 characters').optional(),
});

/** A duration from `min` to `max` (both in ms, written as `minText` / `maxText` in the message). */
const boundedDuration = (fallback: string, min: number, minText: string, max: number, maxText: string) =>
  z
    .string()
    .refine((s) => {
      const ms = tryParseDuration(s);
      return ms !== null && ms >= min && ms <= max;
    }, `must be a duration from "${minText}" to "${maxText}"`)
    .default(fallback);

const threshold = (fallback: number) =>
  z
    .int({ error: 'must be an integer from 1 to 100' })
    .min(1, 'must be an integer from 1 to 100')
    .max(100, 'must be an integer from 1 to 100')
    .default(fallback);

/**
 * Upstream health checks (the data plane's health/): `active` probes every target, `passive` watches the
 * proxied requests; a target found unhealthy leaves the balancer's rotation until it is healthy again.
 */
const HEALTH_CHECK_DEFAULTS = {
  active: { interval: '10s', timeout: '2s', healthy_threshold: 2, unhealthy_threshold: 3 },
  passive: { unhealthy_threshold: 5, ejection: '30s' },
} as const;

/** HTTP statuses a check counts (deduplicated, sorted): the healthy ones of a probe, the failing ones of a proxied attempt. */
const statusListSchema = z
  .array(z.int('must be a whole number').min(100, 'must be a status from 100 to 599').max(599, 'must be a status from 100 to 599'))
  .min(1, 'must not be empty')
  .max(64, 'must have at most 64 statuses')
  .transform((statuses) => [...new Set(statuses)].sort((a, b) => a - b));

/** Headers a probe sends (Host included: a virtual host's health page); not the framing or hop-by-hop ones. */
const probeHeadersSchema = z
  .record(z.string(), headerValueSchema)
  .refine((h) => Object.keys(h).length <= 16, 'must have at most 16 headers')
  .superRefine((h, ctx) => {
    for (const name of Object.keys(h)) {
      const lower = name.toLowerCase();
      // The name checked here rather than by the record's key schema, whose refusal zod words as "Invalid key in record".
      if (!HTTP_TOKEN.test(name)) ctx.addIssue({ code: 'custom', path: [name], message: 'is not a valid header name' });
      else if (HOP_BY_HOP_HEADERS.has(lower) || lower === 'content-length' || lower === 'expect') {
        ctx.addIssue({ code: 'custom', path: [name], message: 'is a header a probe cannot send' });
      }
    }
  })
  // Sorted by name: the stored form, its message and so its hash do not follow the order they were written in.
  .transform((h) => Object.fromEntries(Object.entries(h).sort(([a], [b]) => byCodeUnits(a, b))));

const healthCheckSchema = z
  .object({
    active: z
      .object({
        // Printable ASCII but '#': a probe's request line is this path as it is (a query is allowed).
        // Required unless `grpc` is given (the refinement below).
        path: z
          .string('must be a string')
          .regex(/^\/[!"$-~]*$/, 'must start with "/" and hold only printable ASCII without spaces or "#"')
          .optional(),
        interval: boundedDuration(HEALTH_CHECK_DEFAULTS.active.interval, 100, '100ms', 3_600_000, '1h'),
        timeout: boundedDuration(HEALTH_CHECK_DEFAULTS.active.timeout, 10, '10ms', 60_000, '1m'),
        healthy_threshold: threshold(HEALTH_CHECK_DEFAULTS.active.healthy_threshold),
        unhealthy_threshold: threshold(HEALTH_CHECK_DEFAULTS.active.unhealthy_threshold),
        // Optional without a default (absent: GET, 2xx/3xx, no extra header), so checks stored before them keep their form and hash.
        method: z.enum(['GET', 'HEAD'], 'must be "GET" or "HEAD"').optional(),
        statuses: statusListSchema.optional(),
        headers: probeHeadersSchema.optional(),
        // gRPC's health protocol instead of an HTTP request: grpc.health.v1.Health/Check for `service` ("" = the
        // whole server), healthy when it answers SERVING. Over HTTP/2 only (checked when the API is compiled).
        grpc: z
          .object({
            service: z
              .string('must be a string')
              .max(256, 'must be at most 256 characters')
              .regex(/^[!-~]*$/, 'must be printable ASCII without spaces')
              .default(''),
          })
          .optional(),
      })
      .superRefine((active, ctx) => {
        if (active.grpc === undefined) {
          if (active.path === undefined) ctx.addIssue({ code: 'custom', path: ['path'], message: 'is required (or grpc, for a gRPC health check)' });
          return;
        }
        // What an HTTP probe is made of has no meaning for a gRPC one.
        for (const member of ['path', 'method', 'statuses'] as const) {
          if (active[member] !== undefined) ctx.addIssue({ code: 'custom', path: [member], message: 'cannot be given with grpc' });
        }
      })
      .optional(),
    passive: z
      .object({
        unhealthy_threshold: threshold(HEALTH_CHECK_DEFAULTS.passive.unhealthy_threshold),
        ejection: boundedDuration(HEALTH_CHECK_DEFAULTS.passive.ejection, 100, '100ms', 3_600_000, '1h'),
        // Absent: 502, 503 and 504. An attempt without any response always counts.
        statuses: statusListSchema.optional(),
      })
      .optional(),
  })
  .refine((h) => h.active !== undefined || h.passive !== undefined, 'must have "active", "passive" or both');

/** The normalised health check: each part present only when configured, its defaults filled. */
export type HealthCheckDefinition = z.output<typeof healthCheckSchema>;

/**
 * What `balancing: "hash"` hashes (docs/proxy.md "Proxy behaviour", Balancing). One object rather than a union per
 * source, so the CRD's schema stays structural; the rules per source are the refinement's. A header name is
 * stored lower-cased (node's spelling, one stored form); a cookie name as written (cookie names are case-sensitive).
 */
const hashOnSchema = z
  .object({
    source: z.enum(['ip', 'header', 'cookie'], 'must be "ip", "header" or "cookie"'),
    name: z.string('must be a string').max(256, 'must be at most 256 characters').optional(),
    trust_forward_headers: z.boolean().optional(),
  })
  .superRefine((h, ctx) => {
    const refuse = (member: string, message: string) => ctx.addIssue({ code: 'custom', path: [member], message });
    if (h.source === 'ip') {
      if (h.name !== undefined) refuse('name', 'cannot be given with source "ip"');
      return;
    }
    if (h.trust_forward_headers !== undefined) refuse('trust_forward_headers', 'can be given only with source "ip"');
    if (h.name === undefined) refuse('name', `is required with source "${h.source}"`);
    else if (!HTTP_TOKEN.test(h.name)) refuse('name', `is not a valid ${h.source} name`);
  })
  .transform(
    (h): HashOn =>
      h.source === 'ip'
        ? { source: 'ip', trust_forward_headers: h.trust_forward_headers ?? false }
        : { source: h.source, name: h.source === 'header' ? h.name!.toLowerCase() : h.name! },
  );

const upstreamsSchema = z
  .object({
    balancing: balancingSchema,
    targets: z.array(targetSchema).min(1, 'must not be empty'),
    health_check: healthCheckSchema.optional(),
    // Optional without a default (absent: HTTP/1.1), so definitions stored before it keep their form and hash.
    protocol: z.enum(['http1', 'http2'], 'must be "http1" or "http2"').optional(),
    // Given with balancing "hash" only, so every other definition keeps its form and hash.
    hash_on: hashOnSchema.optional(),
  })
  .superRefine((u, ctx) => {
    if (u.balancing === 'hash' && u.hash_on === undefined) ctx.addIssue({ code: 'custom', path: ['hash_on'], message: 'is required with balancing "hash"' });
    if (u.balancing !== 'hash' && u.hash_on !== undefined)
      ctx.addIssue({ code: 'custom', path: ['hash_on'], message: 'can be given only with balancing "hash"' });
  });

const listenPathSchema = z.string().refine((s) => s === '' || s.startsWith('/'), 'must start with "/"');

export const MAX_MATCH_HEADERS = 16;
export const MAX_MATCH_HEADER_VALUES = 16;

/** What one accepted value may be: visible ASCII with inner spaces, as a client can send it (node trims a value's outer spaces). */
const matchHeaderValueSchema = z
  .string()
  .min(1, 'must not be empty')
  .max(1024, 'must be at most 1024 characters')
  .regex(/^[!-~](?:[ !-~]*[!-~])?$/, 'must be visible ASCII characters, with spaces only between them');

/**
 * Conditions on request headers (docs/proxy.md "Proxy behaviour", Matching): header name → accepted values.
 * Stored in one form (names lower-cased and sorted, values deduplicated and sorted; none at all when
 * empty), so equal conditions have one hash and one route conflict key.
 */
const matchHeadersSchema = z
  .record(
    z.string(),
    z.array(matchHeaderValueSchema).min(1, 'must not be empty').max(MAX_MATCH_HEADER_VALUES, `must have at most ${MAX_MATCH_HEADER_VALUES} values`),
  )
  .superRefine((h, ctx) => {
    const names = Object.keys(h);
    if (names.length > MAX_MATCH_HEADERS) ctx.addIssue({ code: 'custom', message: `must have at most ${MAX_MATCH_HEADERS} headers` });
    const seen = new Set<string>();
    for (const name of names) {
      const lower = name.toLowerCase();
      const refuse = (message: string) => ctx.addIssue({ code: 'custom', path: [name], message });
      // The name checked here rather than by the record's key schema, whose refusal zod words as "Invalid key in record".
      if (name === '') ctx.addIssue({ code: 'custom', message: 'must not have an empty header name' });
      else if (name.startsWith(':')) refuse('is a pseudo-header: use proxy.methods, proxy.listen_path or hosts');
      else if (!HTTP_TOKEN.test(name)) refuse('is not a valid header name');
      // Host has rules of its own (port, case, wildcards): hosts applies them.
      else if (lower === 'host') refuse('cannot be matched here: use hosts');
      else if (HOP_BY_HOP_HEADERS.has(lower)) refuse('is a hop-by-hop header: it describes the connection, not the request');
      else if (seen.has(lower)) refuse('is listed twice (header names are case-insensitive)');
      seen.add(lower);
    }
  })
  .transform((h) => {
    const names = Object.keys(h);
    if (names.length === 0) return undefined;
    return Object.fromEntries(
      names.map((name) => [name.toLowerCase(), [...new Set(h[name])].sort(byCodeUnits)] as const).sort(([a], [b]) => byCodeUnits(a, b)),
    );
  });

/** Raw shape; `normalizeProxy` turns it into a ProxyDefinition. Unknown members are stripped. */
export const proxySchema = z.object({
  listen_path: listenPathSchema.optional(),
  /** Alias of the API's top-level `hosts` (folded in by the API stage; ignored on OAuth endpoints). */
  hosts: z.array(hostSchema).optional(),
  // prefault: a missing upstreams is parsed as {} and so reports `proxy.upstreams.targets is required`
  // (`as never` because zod types a prefault as a complete input).
  upstreams: upstreamsSchema.prefault({} as never),
  methods: z.array(z.string().regex(HTTP_TOKEN, 'is not a valid HTTP method')).min(1, 'must not be empty').optional(),
  // Optional without a default (absent: no header condition), so definitions stored before it keep their form and hash.
  match_headers: matchHeadersSchema.optional(),
  strip_path: z.boolean().default(false),
  append_path: z.boolean().default(false),
  preserve_host: z.boolean().default(false),
  insecure_skip_verify: z.boolean().default(false),
  // Optional without a default (absent: refused), so definitions stored before it keep their form and hash.
  allow_encoded_slashes: z.boolean().optional(),
  forwarding_timeouts: z
    .object({
      dial_timeout: durationSchema(DEFAULT_DIAL_TIMEOUT),
      response_header_timeout: durationSchema(DEFAULT_RESPONSE_HEADER_TIMEOUT),
    })
    .prefault({} as never),
});

/** OAuth endpoints are reached only through their listen_path, so it is required there. */
export const endpointSchema = proxySchema.extend({
  listen_path: listenPathSchema.refine((s) => s !== '', 'is required'),
});

export type RawProxy = z.output<typeof proxySchema>;

/** One frozen `[]` for every empty list of a definition (hosts, plugins, …): see DEFAULT_TIMEOUTS below. */
export const EMPTY_LIST: never[] = Object.freeze([]) as never[];

export function dedupe(values: string[]): string[] {
  return values.length === 0 ? EMPTY_LIST : [...new Set(values)];
}

/**
 * Values most definitions share, as one frozen object each instead of one copy per definition
 * (definitions are never mutated): a data plane holds every definition of the configuration, and a copy
 * of the default timeouts object and the `["ALL"]` array per definition would add up.
 */
const ALL_METHODS: string[] = Object.freeze(['ALL']) as string[];
const DEFAULT_TIMEOUTS = Object.freeze({ dial_timeout: DEFAULT_DIAL_TIMEOUT, response_header_timeout: DEFAULT_RESPONSE_HEADER_TIMEOUT });

/** Fill defaults and canonical forms; idempotent (a normalised proxy normalises to itself). */
export function normalizeProxy(raw: RawProxy): ProxyDefinition {
  const methods = raw.methods ? dedupe(raw.methods.map((m) => m.toUpperCase())) : ALL_METHODS;
  const { dial_timeout, response_header_timeout } = raw.forwarding_timeouts;
  const proxy: ProxyDefinition = {
    upstreams: {
      balancing: raw.upstreams.balancing,
      targets: raw.upstreams.targets.map((t) =>
        t.host_pattern ? { target: t.target, weight: t.weight, host_pattern: t.host_pattern } : { target: t.target, weight: t.weight },
      ),
      ...(raw.upstreams.health_check && { health_check: raw.upstreams.health_check }),
      ...(raw.upstreams.protocol && { protocol: raw.upstreams.protocol }),
      ...(raw.upstreams.hash_on && { hash_on: raw.upstreams.hash_on }),
    },
    // ALL already means any method; listing others beside it adds nothing.
    methods: methods.includes('ALL') ? ALL_METHODS : methods,
    ...(raw.match_headers && { match_headers: raw.match_headers }),
    strip_path: raw.strip_path,
    append_path: raw.append_path,
    preserve_host: raw.preserve_host,
    insecure_skip_verify: raw.insecure_skip_verify,
    // Stored only when true: false is the default, and absent keeps older definitions' hashes.
    ...(raw.allow_encoded_slashes && { allow_encoded_slashes: true }),
    forwarding_timeouts:
      dial_timeout === DEFAULT_DIAL_TIMEOUT && response_header_timeout === DEFAULT_RESPONSE_HEADER_TIMEOUT
        ? DEFAULT_TIMEOUTS
        : { dial_timeout, response_header_timeout },
  };
  return raw.listen_path ? { listen_path: raw.listen_path, ...proxy } : proxy;
}
