/**
 * The routing table: a radix tree keyed on each route's literal listen_path prefix. A lookup walks
 * the request path down the tree once, collecting the buckets it passes, then tries them longest
 * prefix first, so a short prefix never shadows a longer one and the cost follows the path's
 * length, not the number of routes. Everything is decided at build time; lookup is pure.
 *
 * Order inside one bucket (equal literal prefix), fixed at build time:
 *   1. more configured conditions (hosts, methods) first;
 *   2. an exact listen_path before a `/*` one (or none);
 *   3. route name, ascending by code unit; then route id (`api:…` before `oauth:…`).
 * The first route whose every condition holds wins.
 */
import { hostMatcher, normalizeHost } from '#proto/compile/index';
import type { HostMatcher } from '#proto/compile/index';
import type { CompiledRoute } from '#proto/compile/index';
import type { RequestFacts, RouteMatch, RoutingTable } from './index.js';

interface Entry {
  route: CompiledRoute;
  hostOk: HostMatcher;
}

interface Node {
  /** Label of the edge from the parent. */
  edge: string;
  /** Children keyed by the first character of their edge. */
  children: Map<string, Node>;
  bucket: Entry[] | null;
}

function newNode(edge: string): Node {
  return { edge, children: new Map(), bucket: null };
}

function commonPrefixLength(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/** The node for `key`, created (splitting edges) when missing. */
function nodeFor(root: Node, key: string): Node {
  let node = root;
  let rest = key;
  while (rest.length > 0) {
    const child = node.children.get(rest[0]);
    if (!child) {
      const leaf = newNode(rest);
      node.children.set(rest[0], leaf);
      return leaf;
    }
    const common = commonPrefixLength(child.edge, rest);
    if (common < child.edge.length) {
      const mid = newNode(child.edge.slice(0, common));
      child.edge = child.edge.slice(common);
      mid.children.set(child.edge[0], child);
      node.children.set(mid.edge[0], mid);
      if (common === rest.length) return mid;
      node = mid;
    } else {
      node = child;
    }
    rest = rest.slice(common);
  }
  return node;
}

function compareEntries(a: Entry, b: Entry): number {
  const ra = a.route;
  const rb = b.route;
  if (ra.conditionCount !== rb.conditionCount) return rb.conditionCount - ra.conditionCount;
  const exactA = ra.listenPath !== null && !ra.listenPath.wildcard;
  const exactB = rb.listenPath !== null && !rb.listenPath.wildcard;
  if (exactA !== exactB) return exactA ? -1 : 1;
  if (ra.name !== rb.name) return ra.name < rb.name ? -1 : 1;
  return ra.id < rb.id ? -1 : ra.id > rb.id ? 1 : 0;
}

function matchEntry(entry: Entry, method: string, host: string, path: string): RouteMatch | null {
  const { route } = entry;
  if (route.methods && !route.methods.has(method)) return null;
  if (!entry.hostOk(host)) return null;
  if (!route.listenPath) return { route, params: {}, matched: '' };
  const m = route.listenPath.match(path);
  return m ? { route, params: m.params, matched: m.matched } : null;
}

/**
 * Build an immutable table. `path` given to `match` must be the normalised request path
 * (normalizePath): that is the path the listen_paths are compared with and the one forwarded.
 */
export function buildRoutingTable(routes: readonly CompiledRoute[]): RoutingTable {
  const root = newNode('');
  for (const route of routes) {
    const node = nodeFor(root, route.listenPath?.literalPrefix ?? '');
    (node.bucket ??= []).push({ route, hostOk: hostMatcher(route.hosts) });
  }
  const sortAll = (node: Node): void => {
    node.bucket?.sort(compareEntries);
    node.children.forEach(sortAll);
  };
  sortAll(root);
  const size = routes.length;

  return {
    size,
    match(req: RequestFacts): RouteMatch | null {
      try {
        const path = req.path;
        const method = req.method.toUpperCase();
        const host = normalizeHost(req.host);
        const buckets: Entry[][] = [];
        let node = root;
        let i = 0;
        if (node.bucket) buckets.push(node.bucket);
        while (i < path.length) {
          const child = node.children.get(path[i]);
          if (!child || !path.startsWith(child.edge, i)) break;
          i += child.edge.length;
          node = child;
          if (node.bucket) buckets.push(node.bucket);
        }
        for (let b = buckets.length - 1; b >= 0; b--) {
          for (const entry of buckets[b]) {
            const m = matchEntry(entry, method, host, path);
            if (m) return m;
          }
        }
        return null;
      } catch {
        // Lookup never throws (find-my-way's `find`): a malformed request simply matches nothing.
        return null;
      }
    },
  };
}
