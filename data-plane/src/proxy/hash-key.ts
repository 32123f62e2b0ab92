/**
 * What `balancing: "hash"` hashes for a request (docs/proxy.md "Proxy behaviour", Balancing): the client's address
 * (client-ip.ts, TRUSTED_PROXIES, as rate_limit's `key: ip`; hash_on's
 * `trust_forward_headers` has no effect), or the value of a request header or cookie as the client sent it. null when the request has
 * none: the balancer then goes round robin.
 */
import type { IncomingMessage } from 'node:http';
import type { CompiledRoute } from '#proto/compile/index';
import { cookieValue } from '../auth/sealed-cookie.js';
import { clientAddress, type TrustedProxies } from '../plugins/client-ip.js';

/** The request's key for `route`; null for any balancing but hash (or one target: nothing to choose), or when the request has none. */
export function hashKeyOf(req: IncomingMessage, route: CompiledRoute, trusted: TrustedProxies): string | null {
  const hashOn = route.proxy.upstreams.hash_on;
  if (hashOn === undefined || route.targets.length < 2) return null;
  if (hashOn.source === 'ip') return clientAddress(req, trusted);
  if (hashOn.source === 'cookie') return cookieValue(req.headers.cookie, hashOn.name);
  const value = req.headers[hashOn.name];
  return (Array.isArray(value) ? value.join(', ') : value) || null;
}
