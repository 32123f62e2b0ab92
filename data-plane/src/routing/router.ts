/**
 * The routing table: a radix tree keyed on each route's literal listen_path prefix. A lookup walks
 * the request path down the tree once, then tries the buckets it passed, longest prefix first, so a
 * short prefix never shadows a longer one and the cost follows the path's length, not the number
 * of routes. Everything is decided at build time; lookup is pure and allocates little beyond its result.
 *
 * Order inside one bucket (equal literal prefix), fixed at build time:
 *   1. more configured conditions (hosts, methods) first;
 *   2. an exact listen_path before a `/*` one (or none);
 *   3. route name, ascending by code unit; then route id (`api:…` before `oauth:…`).
 * The first route whose every condition holds wins.
 *
 * Many APIs can share one literal prefix and differ by host only (one per tenant, or hosts-only
 * APIs, which all sit at the root). So that such a bucket is not scanned entry by entry, its
 * entries whose hosts are all exact names are also indexed by host: a lookup merges the index's
 * list for the request's host with the bucket's other entries, in bucket order.
 *
 * Measured: lookups spread over 10,000 routes cost several times those over 10 routes, but lookups
 * of 10 routes cost the same in a table of 10 or of 10,000. The difference is memory (the nodes and
 * matchers of 10,000 routes are rarely in the CPU cache), not work; hence compact lookup nodes (a
 * string of first characters rather than a Map per node) and no per-lookup arrays.
 */
import { hostMatcher, normalizeHost } from '#proto/compile/index';
import type { CompiledListenPath, CompiledRoute, HostMatcher } from '#proto/compile/index';
import type { RequestFacts, RouteMatch, RoutingTable } from './index.js';

interface Entry {
  route: CompiledRoute;
  /** Position in its bucket's priority order. */
  rank: number;
  methods: ReadonlySet<string> | null;
  /** null when the route has no hosts condition (it never needs the request's host). */
  hostOk: HostMatcher | null;
  listenPath: CompiledListenPath | null;
}

/** The routes of one literal prefix, in priority order. */
interface Bucket {
  /** Every entry; what a lookup walks when there is no host index. */
  entries: readonly Entry[];
  /** Entries whose hosts are exact names only, listed under each of their hosts; null when none. */
  byHost: ReadonlyMap<string, readonly Entry[]> | null;
  /** With `byHost`: every other entry (no hosts condition, or a wildcard among its hosts). */
  rest: readonly Entry[];
}

/** The buckets a lookup tries once it stops at a node: its own (if any), then its ancestors'. */
interface Chain {
  bucket: Bucket;
  next: Chain | null;
}

const NONE: readonly Entry[] = Object.freeze([]);

/** Build-time node. */
interface Node {
  /** Label of the edge from the parent. */
  edge: string;
  /** Children keyed by the first character of their edge. */
  children: Map<string, Node>;
  bucket: Entry[] | null;
}

/** Lookup-time node: read-only and compact. */
interface Frozen {
  edge: string;
  /** First character of each child's edge, index-aligned with `children`. */
  firsts: string;
  children: Frozen[];
  /** Buckets to try, longest prefix first, when the walk ends here. */
  chain: Chain | null;
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

/** A host pattern without `*` matches exactly that (normalised) host and nothing else. */
function isExactHost(pattern: string): boolean {
  return !pattern.includes('*');
}

function toBucket(unsorted: Entry[]): Bucket {
  const entries = unsorted.sort(compareEntries);
  entries.forEach((entry, rank) => (entry.rank = rank));
  const indexed = (e: Entry): boolean => e.route.hosts.length > 0 && e.route.hosts.every(isExactHost);
  if (!entries.some(indexed)) return { entries, byHost: null, rest: NONE };
  const byHost = new Map<string, Entry[]>();
  const rest: Entry[] = [];
  for (const entry of entries) {
    if (!indexed(entry)) {
      rest.push(entry);
      continue;
    }
    for (const host of new Set(entry.route.hosts)) {
      const list = byHost.get(host);
      if (list) list.push(entry);
      else byHost.set(host, [entry]);
    }
  }
  return { entries, byHost, rest };
}

/** Sorts every bucket and links each node to the buckets above it (iterative: keys may be long). */
function freeze(root: Node): Frozen {
  const out = (node: Node, above: Chain | null): Frozen => {
    const chain = node.bucket ? { bucket: toBucket(node.bucket), next: above } : above;
    return { edge: node.edge, firsts: '', children: [], chain };
  };
  const frozenRoot = out(root, null);
  const stack: Array<[Node, Frozen]> = [[root, frozenRoot]];
  while (stack.length > 0) {
    const [node, frozen] = stack.pop()!;
    for (const [first, child] of node.children) {
      const frozenChild = out(child, frozen.chain);
      frozen.firsts += first;
      frozen.children.push(frozenChild);
      stack.push([child, frozenChild]);
    }
  }
  return frozenRoot;
}

/**
 * Build an immutable table. `path` given to `match` must be the normalised request path
 * (normalizePath): that is the path the listen_paths are compared with and the one forwarded.
 */
export function buildRoutingTable(routes: readonly CompiledRoute[]): RoutingTable {
  const building = newNode('');
  for (const route of routes) {
    const node = nodeFor(building, route.listenPath?.literalPrefix ?? '');
    (node.bucket ??= []).push({
      route,
      rank: 0,
      methods: route.methods,
      hostOk: route.hosts.length > 0 ? hostMatcher(route.hosts) : null,
      listenPath: route.listenPath,
    });
  }
  const root = freeze(building);
  const size = routes.length;

  return {
    size,
    match(req: RequestFacts): RouteMatch | null {
      try {
        const path = req.path;
        let node = root;
        let i = 0;
        while (i < path.length) {
          const k = node.firsts.indexOf(path[i]);
          if (k < 0) break;
          const child = node.children[k];
          if (!path.startsWith(child.edge, i)) break;
          i += child.edge.length;
          node = child;
        }
        const method = req.method.toUpperCase();
        let host: string | undefined; // normalised on first use: most routes have no hosts condition
        for (let chain = node.chain; chain !== null; chain = chain.next) {
          const { bucket } = chain;
          // Two lists in bucket order, merged by rank: the host's indexed entries and the others.
          let hosted = NONE;
          let others = bucket.entries;
          if (bucket.byHost !== null) {
            hosted = bucket.byHost.get((host ??= normalizeHost(req.host))) ?? NONE;
            others = bucket.rest;
          }
          let a = 0;
          let b = 0;
          while (a < hosted.length || b < others.length) {
            const entry = b === others.length || (a < hosted.length && hosted[a].rank < others[b].rank) ? hosted[a++] : others[b++];
            if (entry.methods !== null && !entry.methods.has(method)) continue;
            if (entry.hostOk !== null && !entry.hostOk((host ??= normalizeHost(req.host)))) continue;
            const { route, listenPath } = entry;
            if (listenPath === null) return { route, params: {}, matched: '' };
            const m = listenPath.match(path);
            if (m) return { route, params: m.params, matched: m.matched };
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
