/**
 * One credential per request: on a route with an authentication plugin, a request carrying more than one of a field
 * that plugin reads (Authorization for oauth2 and basic_auth, key_auth's header names, openid_connect's Cookie) is
 * refused with 400 CREDENTIALS_AMBIGUOUS before any plugin runs. Otherwise a plugin would judge one copy while the
 * upstream, which gets them all, might read another (a valid token followed by an `alg: none` one).
 * HTTP/2 may split Cookie into several fields (RFC 9113 §8.2.3), which node joins: there the session and flow cookie
 * names are what must appear once.
 */
import type { CompiledRoute } from '#proto/compile/index';
import { GatehouseError } from '#proto/errors';
import type { PluginStage } from './pipeline.js';
import { isHttp2 } from './request-framing.js';

function ambiguous(what: string): never {
  throw new GatehouseError('CREDENTIALS_AMBIGUOUS', `more than one ${what} in the request`);
}

/** How many times `name` (lower-case) is among the raw header names. */
function fieldCount(raw: readonly string[], name: string): number {
  let count = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === name.length && raw[i]!.toLowerCase() === name) count++;
  return count;
}

/** How many cookies of the Cookie header value are named `name`. */
function cookieCount(header: string, name: string): number {
  let count = 0;
  for (const pair of header.split(';')) {
    const eq = pair.indexOf('=');
    if ((eq < 0 ? pair : pair.slice(0, eq)).trim() === name) count++;
  }
  return count;
}

/** The stage that runs first on `route`, or null when no plugin of it reads a credential. */
export function credentialFieldsStage(route: CompiledRoute): PluginStage | null {
  const fields = new Set<string>();
  const cookies: string[] = [];
  for (const plugin of route.plugins) {
    if (plugin.name === 'oauth2' || plugin.name === 'basic_auth') fields.add('authorization');
    else if (plugin.name === 'key_auth') for (const name of plugin.config.headerNames) fields.add(name);
    else if (plugin.name === 'openid_connect') cookies.push(plugin.config.cookieName, plugin.config.flowCookieName);
  }
  if (fields.size === 0 && cookies.length === 0) return null;
  const names = [...fields];
  return {
    request(ex) {
      const raw = ex.req.rawHeaders;
      for (const name of names) if (fieldCount(raw, name) > 1) ambiguous(`${name} header`);
      if (cookies.length === 0) return;
      if (!isHttp2(ex.req) && fieldCount(raw, 'cookie') > 1) ambiguous('cookie header');
      const header = ex.req.headers.cookie;
      if (header !== undefined) for (const name of cookies) if (cookieCount(header, name) > 1) ambiguous(`${name} cookie`);
    },
  };
}
