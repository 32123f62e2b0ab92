/**
 * openid_connect (config: proto/src/plugins/openid-connect.ts; docs/plugins.md "openid_connect"): browser sign-in with the
 * authorization code flow and PKCE S256; the provider's side is auth/oidc-provider.ts, the cookies auth/sealed-cookie.ts.
 * Paths are the route's matched prefix joined with the configured ones (P = prefix + redirect_path, L = prefix + logout_path):
 *
 * | request                                           | answer                                                              |
 * |---------------------------------------------------|---------------------------------------------------------------------|
 * | L                                                 | 302 to end_session_endpoint (or post_logout_redirect); both cookies cleared |
 * | P with the flow cookie and its `state`            | code exchanged, ID token verified; 302 back to the saved URL with the session cookie |
 * | P otherwise (no or other state, IdP `error`)      | 400 SIGN_IN_CALLBACK_INVALID                                        |
 * | a valid session cookie                            | forwarded: user_header = sub (and claim headers), our cookies stripped |
 * | GET/HEAD accepting text/html, no valid session    | 302 to authorization_endpoint; the flow cookie (10 min) holds state, nonce, verifier, URL |
 * | anything else                                     | 401 SIGN_IN_REQUIRED                                                |
 *
 * Every URL the gateway writes takes the request's Host through proto/src/location.ts (else 400 BAD_REQUEST_HOST),
 * and the return URL is a path of that origin: no open redirect.
 */
import { createHash, randomBytes } from 'node:crypto';
import { GatehouseError } from '#proto/errors';
import { locationOf, parseAuthority } from '#proto/location';
import type { CompiledHeaderEdits, CompiledOpenidConnect } from '#proto/plugins/index';
import { joinPaths } from '#proto/routing/index';
import type { OidcProviders, ProviderEndpoints } from '../auth/oidc-provider.js';
import { cookieValue, MAX_SEALED_LENGTH, seal, unseal, withoutCookies } from '../auth/sealed-cookie.js';
import { claimText } from '../auth/token-grant.js';
import { isPromise, type PluginAnswer, type PluginExchange } from './pipeline.js';
import { originalScheme } from './client-ip.js';
import { editHeaderList } from './request-transformer.js';
import type { PluginRuntime } from './runtime.js';

const FLOW_TTL_S = 600;
const random = () => randomBytes(32).toString('base64url');
const nowS = () => Math.floor(Date.now() / 1000);

function origin(ex: PluginExchange, scheme: 'http' | 'https'): (path: string) => string {
  const authority = parseAuthority(ex.req.headers.host);
  if (!authority) throw new GatehouseError('BAD_REQUEST_HOST', 'openid_connect: the Host header is not a host');
  return (path) => locationOf(scheme, authority.hostname, authority.port, path);
}

function queryParam(query: string, name: string): string | null {
  return new URLSearchParams(query).get(name);
}

function wantsHtml(ex: PluginExchange): boolean {
  const method = ex.req.method;
  return (method === 'GET' || method === 'HEAD') && /\btext\/html\b/i.test(ex.req.headers.accept ?? '');
}

export const openidConnectRuntime: PluginRuntime<CompiledOpenidConnect> = {
  stage: (c, { oidc, trustedProxies }) => {
    // The scheme the browser used: the listener's, or a trusted proxy's X-Forwarded-Proto (client-ip.ts).
    const schemeOf = (ex: PluginExchange) => originalScheme(ex.req, trustedProxies);
    const ours = new Set([c.cookieName, c.flowCookieName]);
    const cookie = (name: string, value: string, maxAge: number, secure: boolean) =>
      `${name}=${value}; Path=/; Max-Age=${maxAge}; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`;
    // The client's own copies of the headers this plugin sets never reach the upstream.
    const strip: CompiledHeaderEdits = { remove: new Set(['cookie', c.userHeader, ...c.claimHeaders.map(([, h]) => h)]), replace: [], add: [], append: [] };

    const provider = (): OidcProviders =>
      oidc ??
      (() => {
        throw new GatehouseError('IDENTITY_PROVIDER_UNAVAILABLE', 'openid_connect: no OpenID provider client in this process');
      })();
    const withEndpoints = <T>(use: (e: ProviderEndpoints) => T): T | Promise<T> => {
      const found = provider().endpoints(c);
      return isPromise<ProviderEndpoints>(found) ? found.then(use) : use(found);
    };

    function signIn(ex: PluginExchange): PluginAnswer | Promise<PluginAnswer> {
      const url = origin(ex, schemeOf(ex));
      const redirectUri = url(joinPaths(ex.matched, c.redirectPath));
      const returnTo = ex.query === '' ? ex.path : `${ex.path}?${ex.query}`;
      const flow = { s: random(), n: random(), v: random(), u: returnTo.length > 2048 ? ex.path.slice(0, 2048) : returnTo, exp: nowS() + FLOW_TTL_S };
      return withEndpoints((e) => {
        const authorize = new URL(e.authorization);
        const params = {
          response_type: 'code',
          client_id: c.clientId,
          redirect_uri: redirectUri,
          scope: c.scope,
          state: flow.s,
          nonce: flow.n,
          code_challenge: createHash('sha256').update(flow.v).digest('base64url'),
          code_challenge_method: 'S256',
        };
        for (const [k, v] of Object.entries(params)) authorize.searchParams.set(k, v);
        return {
          status: 302,
          headers: {
            location: authorize.href,
            'set-cookie': cookie(c.flowCookieName, seal(c.cookieKey, c.flowCookieName, flow), FLOW_TTL_S, schemeOf(ex) === 'https'),
            'cache-control': 'no-store',
          },
        };
      });
    }

    async function callback(ex: PluginExchange): Promise<PluginAnswer> {
      const url = origin(ex, schemeOf(ex));
      const flow = unseal(c.cookieKey, c.flowCookieName, cookieValue(ex.req.headers.cookie, c.flowCookieName), nowS());
      const state = queryParam(ex.query, 'state');
      const code = queryParam(ex.query, 'code');
      if (!flow || typeof flow.s !== 'string' || state !== flow.s)
        throw new GatehouseError('SIGN_IN_CALLBACK_INVALID', 'sign-in callback: state does not match a sign-in of this browser');
      if (code === null)
        throw new GatehouseError('SIGN_IN_CALLBACK_INVALID', `sign-in callback: no code (error ${JSON.stringify(queryParam(ex.query, 'error'))})`);
      const redirectUri = url(joinPaths(ex.matched, c.redirectPath));
      const grant = await provider().signIn(c, code, String(flow.v), redirectUri, String(flow.n));
      const sub = grant.claims.get('sub')!;
      const claims: Record<string, string> = {};
      for (const [claim] of c.claimHeaders) {
        const value = grant.claims.get(claim);
        if (value !== undefined) claims[claim] = value;
      }
      const secure = schemeOf(ex) === 'https';
      const session = seal(c.cookieKey, c.cookieName, { sub, c: claims, exp: nowS() + c.sessionTtlS });
      if (session.length > MAX_SEALED_LENGTH)
        throw new GatehouseError('SIGN_IN_CALLBACK_INVALID', 'sign-in callback: the session would not fit in a cookie (claims_to_headers values too long)');
      // The saved URL is a path of this origin (the flow cookie is sealed; a path starting // is made absolute here).
      const back = typeof flow.u === 'string' && flow.u.startsWith('/') ? flow.u : '/';
      return {
        status: 302,
        headers: {
          location: url(back),
          'set-cookie': [cookie(c.cookieName, session, c.sessionTtlS, secure), cookie(c.flowCookieName, '', 0, secure)],
          'cache-control': 'no-store',
        },
      };
    }

    function logout(ex: PluginExchange): PluginAnswer | Promise<PluginAnswer> {
      const url = origin(ex, schemeOf(ex));
      const secure = schemeOf(ex) === 'https';
      const local = url(c.postLogoutRedirect);
      const answer = (location: string): PluginAnswer => ({
        status: 302,
        headers: { location, 'set-cookie': [cookie(c.cookieName, '', 0, secure), cookie(c.flowCookieName, '', 0, secure)], 'cache-control': 'no-store' },
      });
      const toProvider = (e: ProviderEndpoints) => {
        if (e.endSession === undefined) return answer(local);
        const end = new URL(e.endSession);
        end.searchParams.set('client_id', c.clientId);
        end.searchParams.set('post_logout_redirect_uri', local);
        return answer(end.href);
      };
      // Signing out never waits on, nor fails with, the provider: without its document the cookie is cleared locally.
      try {
        const out = withEndpoints(toProvider);
        return isPromise<PluginAnswer>(out) ? out.catch(() => answer(local)) : out;
      } catch {
        return answer(local);
      }
    }

    function admit(ex: PluginExchange, session: Record<string, unknown>): void {
      const headers = editHeaderList(ex.headers, strip);
      const rest = ex.req.headers.cookie === undefined ? null : withoutCookies(ex.req.headers.cookie, ours);
      if (rest !== null) headers.push('cookie', rest);
      const sub = claimText(session.sub);
      if (sub !== undefined) headers.push(c.userHeader, sub);
      ex.identity = `openid_connect:${c.issuer}\0${String(session.sub)}`;
      ex.personal = true;
      const claims = (session.c ?? {}) as Record<string, unknown>;
      for (const [claim, header] of c.claimHeaders) {
        const value = claimText(claims[claim]);
        if (value !== undefined) headers.push(header, value);
      }
      ex.headers = headers;
    }

    return {
      request(ex) {
        const path = ex.path;
        if (path === joinPaths(ex.matched, c.logoutPath)) return logout(ex);
        if (path === joinPaths(ex.matched, c.redirectPath)) return callback(ex);
        const session = unseal(c.cookieKey, c.cookieName, cookieValue(ex.req.headers.cookie, c.cookieName), nowS());
        if (session && typeof session.sub === 'string') return admit(ex, session);
        if (wantsHtml(ex)) return signIn(ex);
        throw new GatehouseError('SIGN_IN_REQUIRED', 'no valid openid_connect session');
      },
    };
  },
};
