/**
 * redirect (config: proto/src/plugins/redirect.ts, which has the table): every request of the route is answered
 * with the status and a Location made of the configured parts and the request's others; nothing goes upstream.
 * Without a configured host, the Location names the request's host only when it is one of the API's exact hosts,
 * else the first of them (compile refuses the plugin on an API without one): never a host only the client chose.
 * The request's Host must read as a host (proto/src/location.ts) for its port to be used (else 400
 * BAD_REQUEST_HOST, as the HTTP → HTTPS listener answers); the path is the normalised one the route matched.
 */
import { GatehouseError } from '#proto/errors';
import { exactHosts } from '#proto/compile/index';
import { locationOf, parseAuthority } from '#proto/location';
import type { CompiledRedirect } from '#proto/plugins/index';
import { joinPaths, stripMatched } from '#proto/routing/index';
import type { PluginExchange } from './pipeline.js';
import { listenerScheme } from './request-framing.js';
import type { PluginRuntime } from './runtime.js';

function locationFor(c: CompiledRedirect, apiHosts: ReadonlySet<string>, ex: PluginExchange): string {
  const authority = parseAuthority(ex.req.headers.host);
  if (authority === null && c.host === null) throw new GatehouseError('BAD_REQUEST_HOST', 'redirect: the Host header is not a host');
  const host = c.host ?? (authority && apiHosts.has(authority.hostname) ? authority.hostname : apiHosts.values().next().value!);
  // Gateway API: without a port, the scheme's own when the scheme is set, else the one the client used.
  const port = c.port ?? (c.scheme === null ? (authority?.port ?? null) : null);
  const path = c.path === null ? ex.path : c.prefix ? joinPaths(c.path, stripMatched(ex.path, ex.matched)) : c.path;
  return locationOf(c.scheme ?? listenerScheme(ex.req), host, port, ex.query === '' ? path : `${path}?${ex.query}`);
}

export const redirectRuntime: PluginRuntime<CompiledRedirect> = {
  stage: (c, { route }) => {
    const apiHosts = new Set(exactHosts(route.hosts));
    return { request: (ex) => ({ status: c.status, headers: { location: locationFor(c, apiHosts, ex) } }) };
  },
};
