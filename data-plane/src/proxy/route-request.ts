/**
 * The first stage of every request (HTTP/1.1, h2 and WebSocket handshakes alike): the serving table it uses to the
 * end, its normalised path and query, and the route that matches it.
 */
import type { IncomingMessage } from 'node:http';
import { GatehouseError } from '#proto/errors';
import { normalizePath, refusedBeforeRouting, refusedForApi, type RouteMatch } from '../routing/index.js';
import type { ServingTable, TableSource } from '../table/index.js';

interface RequestTarget {
  path: string;
  /** Raw query string without '?', '' when none. */
  query: string;
}

/** Origin-form (`/a?b`) as sent by clients; absolute-form (`http://h/a?b`) as sent to proxies. */
function splitTarget(url: string | undefined): RequestTarget | null {
  if (!url) return null;
  let target = url;
  if (!url.startsWith('/')) {
    if (!/^https?:\/\//i.test(url)) return null;
    try {
      const parsed = new URL(url);
      target = parsed.pathname + parsed.search;
    } catch {
      return null;
    }
  }
  const q = target.indexOf('?');
  return q === -1 ? { path: target, query: '' } : { path: target.slice(0, q), query: target.slice(q + 1) };
}

/**
 * The route for this request. A CORS preflight (OPTIONS with Origin and Access-Control-Request-Method)
 * asks about another method: when no route takes OPTIONS itself, the route the announced method would
 * reach answers it, provided that route has a cors plugin (which then answers the preflight).
 */
function matchRequest(snapshot: ServingTable, req: IncomingMessage, path: string): RouteMatch | null {
  const facts = { method: req.method ?? 'GET', host: req.headers.host, path, headers: req.headers };
  const match = snapshot.routing.match(facts);
  if (match || req.method !== 'OPTIONS') return match;
  const announced = req.headers['access-control-request-method'];
  if (announced === undefined || req.headers.origin === undefined) return null;
  const preflight = snapshot.routing.match({ ...facts, method: announced.toUpperCase() });
  return preflight?.route.plugins.some((p) => p.name === 'cors') ? preflight : null;
}

/** A request's serving table, its route and where in it: path (normalised) and query (raw, without '?'). */
export interface RoutedRequest {
  snapshot: ServingTable;
  match: RouteMatch;
  path: string;
  query: string;
}

/**
 * The snapshot, route and normalised path of a request (HTTP/1.1, h2 and WebSocket handshakes alike); throws
 * NO_SNAPSHOT / AMBIGUOUS_PATH / NO_ROUTE. A path an upstream could read otherwise than the router did is refused
 * before matching; encoded slashes after it, unless the matched API allows them (proxy.allow_encoded_slashes).
 */
export function routeOf(tables: TableSource, req: IncomingMessage): RoutedRequest {
  // Read the reference once: this request uses this snapshot to the end, whatever is applied meanwhile.
  const snapshot = tables.current();
  if (!snapshot) throw new GatehouseError('NO_SNAPSHOT', 'no snapshot applied yet');
  const target = splitTarget(req.url);
  const path = target ? normalizePath(target.path) : null;
  const early = path && refusedBeforeRouting(path);
  if (early) throw new GatehouseError('AMBIGUOUS_PATH', early);
  const match = path ? matchRequest(snapshot, req, path) : null;
  if (!match || !path) throw new GatehouseError('NO_ROUTE', 'no API found with those values');
  const late = refusedForApi(path, match.route.proxy.allow_encoded_slashes);
  if (late) throw new GatehouseError('AMBIGUOUS_PATH', late);
  return { snapshot, match, path, query: target!.query };
}
