/**
 * redirect (config: proto/src/plugins/redirect.ts, which has the table): every request of the route is answered
 * with the status and a Location made of the configured parts and the request's others; nothing goes upstream.
 * The request's Host goes into the Location only once proto/src/location.ts reads it as a host (else 400
 * BAD_REQUEST_HOST, as the HTTP → HTTPS listener answers); the path is the normalised one the route matched.
 */
import { GatehouseError } from '#proto/errors';
import { locationOf, parseAuthority } from '#proto/location';
import type { CompiledRedirect } from '#proto/plugins/index';
import { joinPaths, stripMatched } from '#proto/routing/index';
import type { PluginExchange } from './pipeline.js';
import { listenerScheme } from './request-framing.js';
import type { PluginRuntime } from './runtime.js';

function locationFor(c: CompiledRedirect, ex: PluginExchange): string {
  const authority = parseAuthority(ex.req.headers.host);
  const host = c.host ?? authority?.hostname;
  if (host === undefined) throw new GatehouseError('BAD_REQUEST_HOST', 'redirect: the Host header is not a host');
  // Gateway API: without a port, the scheme's own when the scheme is set, else the one the client used.
  const port = c.port ?? (c.scheme === null ? (authority?.port ?? null) : null);
  const path = c.path === null ? ex.path : c.prefix ? joinPaths(c.path, stripMatched(ex.path, ex.matched)) : c.path;
  return locationOf(c.scheme ?? listenerScheme(ex.req), host, port, ex.query === '' ? path : `${path}?${ex.query}`);
}

export const redirectRuntime: PluginRuntime<CompiledRedirect> = {
  stage: (c) => ({
    request: (ex) => ({ status: c.status, headers: { location: locationFor(c, ex) } }),
  }),
};
