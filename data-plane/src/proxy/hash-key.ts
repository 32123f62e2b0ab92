/**
 * What `balancing: "hash"` hashes for a request (docs/proxy.md "Proxy behaviour", Balancing): the client's address
 * (client-ip.ts: the TCP peer, or with trust_forward_headers the one the proxy in front saw, as rate_limit's
 * `key: ip`), or the value of a request header or cookie as the client sent it. null when the request has
 * none: the balancer then goes round robin.
 */
import type { IncomingMessage } from 'node:http';
import type { CompiledRoute } from '#proto/compile/index';
import { cookieValue } from '../auth/sealed-cookie.js';
import { clientIp } from '../plugins/client-ip.js';

/** The request's key for `route`; null for any balancing but hash (or one target: nothing to choose), or when the request has none. */
export function hashKeyOf(req: IncomingMessage, route: CompiledRoute): string | null {
  const hashOn = route.proxy.upstreams.hash_on;
  if (hashOn === undefined || route.targets.length < 2) return null;
  if (hashOn.source === 'ip') return clientIp(req, hashOn.trust_forward_headers);
  if (hashOn.source === 'cookie') return cookieValue(req.headers.cookie, hashOn.name);
  const value = req.headers[hashOn.name];
  return (Array.isArray(value) ? value.join(', ') : value) || null;
}
