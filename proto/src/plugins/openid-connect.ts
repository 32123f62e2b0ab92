/**
 * openid_connect: the API signs browsers in with an OpenID Connect provider (authorization code flow with PKCE)
 * and lets through requests that carry the gateway's encrypted session cookie (docs/plugins.md "openid_connect"; the flow
 * is data-plane/src/plugins/openid-connect.ts's).
 *
 * - `issuer`: https (http only for a loopback host, or with `allow_http`); its discovery document is
 *   `<issuer>/.well-known/openid-configuration`, fetched by each data plane.
 * - `client_secret` travels and is shown like an introspection server's: the definition holds it.
 * - `cookie_secret`: the cookies' AES-256-GCM key is derived from it (HKDF-SHA256), the same on every data plane;
 *   at least 32 characters. Changing it signs everyone out.
 * - `redirect_path`, `logout_path`: under the route's matched listen path (`/app/*` + `/callback` = `/app/callback`).
 * - `post_logout_redirect`: a path of the same origin.
 * - `claims_to_headers`: oauth2's rule, with the ID token's claims; stored only when given.
 */
import { hkdfSync, createSecretKey, type KeyObject } from 'node:crypto';
import { z } from 'zod';
import { tryParseDurationUpTo } from '../duration.js';
import { durationIn, jwksUriProblem } from '../definition/oauth-server-schema.js';
import { headerNameSchema, reservedHeaderReason } from './http-syntax.js';
import { claimsToHeadersSchema, emptyIsAbsent, MAX_SCOPES, scopeSchema } from './oauth2.js';
import { deepFreeze, definePlugin } from './plugin.js';

const PRINTABLE = /^[\x21-\x7e]+$/;
const SECRET = /^[\x20-\x7e]+$/;
/** RFC 6265 cookie-name: an RFC 7230 token. */
const COOKIE_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$/;
/** A path of the gateway's own origin: no `//` or `/\` (a browser reads both as another host), nothing outside visible ASCII. */
const LOCAL_PATH = /^\/(?![/\\])[\x21-\x7e]{0,255}$/;

/** Secrets may hold spaces (as introspection's client_secret); names and URLs may not. */
const text = (max: number, spaces = false) =>
  z
    .string({ error: (iss) => (iss.input === undefined ? 'is required' : 'must be a string') })
    .min(1, 'is required')
    .max(max, `must be at most ${max} characters`)
    .regex(spaces ? SECRET : PRINTABLE, spaces ? 'must be printable ASCII' : 'must be printable ASCII without spaces');

const localPath = (fallback: string, query: boolean) =>
  z
    .string({ error: 'must be a path' })
    .regex(LOCAL_PATH, 'must be a path starting with a single / (printable ASCII, at most 256 characters)')
    .refine((p) => query || !/[?#]/.test(p), 'must not contain ? or #')
    .default(fallback);

const schema = z
  .object({
    issuer: text(2048),
    allow_http: z.boolean({ error: 'must be a boolean' }).default(false),
    client_id: text(256),
    client_secret: text(1024, true),
    cookie_secret: text(1024, true).refine((s) => s.length >= 32, 'must be at least 32 characters (the cookie key is derived from it)'),
    redirect_path: localPath('/callback', false),
    logout_path: localPath('/logout', false),
    post_logout_redirect: localPath('/', true),
    scopes: z
      .array(scopeSchema, { error: 'must be an array of scopes' })
      .max(MAX_SCOPES, `must have at most ${MAX_SCOPES} scopes`)
      // `openid` is what makes the request an OpenID Connect one (Core §3.1.2.1): always asked, first.
      .transform((s) => [...new Set(['openid', ...s])])
      .default(['openid']),
    cookie_name: z.string({ error: 'must be a string' }).regex(COOKIE_NAME, 'must be a cookie name (1-64 token characters)').default('gatehouse_oidc'),
    session_ttl: durationIn(60_000, 24 * 3_600_000, '"1m" to "24h"').default('1h'),
    timeout: durationIn(1, 60_000, '"1ms" to "60s"').default('5s'),
    user_header: headerNameSchema.default('X-Authenticated-User'),
    claims_to_headers: z.preprocess(emptyIsAbsent, claimsToHeadersSchema.optional()),
  })
  .superRefine((c, ctx) => {
    const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
    const problem = jwksUriProblem(c.issuer, c.allow_http);
    if (problem) issue('issuer', problem);
    else if (/[?#]/.test(c.issuer)) issue('issuer', 'must not contain a query or fragment');
    if (c.redirect_path === c.logout_path) issue('logout_path', 'must differ from redirect_path');
    const user = c.user_header.toLowerCase();
    const reason = user === 'cookie' || user === 'authorization' ? 'is a credential header' : reservedHeaderReason(user);
    if (reason) issue('user_header', `${reason} and cannot carry the user`);
    if (Object.values(c.claims_to_headers ?? {}).some((h) => h.toLowerCase() === user))
      issue('claims_to_headers', `must not name user_header ${c.user_header}`);
  });

export interface CompiledOpenidConnect {
  issuer: string;
  /** Where the discovery document is: origin and path. */
  discoveryOrigin: string;
  discoveryPath: string;
  allowHttp: boolean;
  clientId: string;
  /** client_secret_basic's Authorization value (RFC 6749 §2.3.1: both parts form-encoded first). */
  clientAuthorization: string;
  /** AES-256-GCM key of both cookies. */
  cookieKey: KeyObject;
  /** Relative to the route's matched prefix. */
  redirectPath: string;
  logoutPath: string;
  postLogoutRedirect: string;
  /** `scope` of the authorization request. */
  scope: string;
  cookieName: string;
  /** The short-lived cookie of a sign-in in progress (state, nonce, PKCE verifier, where to return). */
  flowCookieName: string;
  sessionTtlS: number;
  timeoutMs: number;
  /** Lower-case. */
  userHeader: string;
  claimHeaders: readonly (readonly [string, string])[];
  /** Discovery settings (issuer, allow_http, timeout) in one string: data planes share a document per key. */
  discoveryKey: string;
}

const formEncode = (v: string) => encodeURIComponent(v).replace(/%20/g, '+');

export const openidConnectPlugin = definePlugin({
  schema,
  compile: (c): CompiledOpenidConnect => {
    const base = c.issuer.replace(/\/+$/, '');
    const url = new URL(`${base}/.well-known/openid-configuration`);
    const timeoutMs = tryParseDurationUpTo(c.timeout, Infinity)!;
    return deepFreeze({
      issuer: c.issuer,
      discoveryOrigin: url.origin,
      discoveryPath: url.pathname,
      allowHttp: c.allow_http,
      clientId: c.client_id,
      clientAuthorization: `Basic ${Buffer.from(`${formEncode(c.client_id)}:${formEncode(c.client_secret)}`).toString('base64')}`,
      cookieKey: createSecretKey(Buffer.from(hkdfSync('sha256', c.cookie_secret, 'gatehouse', 'openid_connect cookies', 32))),
      redirectPath: c.redirect_path,
      logoutPath: c.logout_path,
      postLogoutRedirect: c.post_logout_redirect,
      scope: c.scopes.join(' '),
      cookieName: c.cookie_name,
      flowCookieName: `${c.cookie_name}_flow`,
      sessionTtlS: Math.floor(tryParseDurationUpTo(c.session_ttl, Infinity)! / 1000),
      timeoutMs,
      userHeader: c.user_header.toLowerCase(),
      claimHeaders: Object.entries(c.claims_to_headers ?? {}).map(([claim, header]) => [claim, header.toLowerCase()] as const),
      discoveryKey: JSON.stringify([c.issuer, c.allow_http, timeoutMs]),
    });
  },
});
