/**
 * The routing table: a radix tree keyed on each route's literal listen_path prefix. A lookup walks
 * the request path down the tree once, then tries the buckets it passed, longest prefix first, so a
 * short prefix never shadows a longer one and the cost follows the path's length, not the number
 * of routes. Everything is decided at build time; lookup is pure and allocates little beyond its result.
 * A snapshot delta does not rebuild the table: updateRoutingTable rebuilds only the buckets of the
 * changed routes' prefixes and copies the nodes on the way to them, sharing the rest, so a one-route
 * delta costs the same whatever the number of routes.
 *
 * Order inside one bucket (equal literal prefix), fixed at build time:
 *   1. more configured conditions (hosts, methods, each header of match_headers) first;
 *   2. an exact listen_path before a `/*` one (or none);
 *   3. route name, ascending by code unit; then route id (`api:…` before `oauth:…`).
 * The first route whose every condition holds wins.
 *
 * A bucket can hold many routes, so it is not scanned entry by entry; two indexes narrow it to the
 * entries that can match, and the lookup takes the best-ranked match among those:
 *   - by host: entries whose hosts are all exact names (one API per tenant, hosts-only APIs at the
 *     root) are listed under each of their hosts;
 *   - by path segment: a prefix ends at the first parameter, so a family like `/api/{id}/res-N/*`
 *     shares the bucket `/api/`. Entries with a literal segment after the prefix (`res-N`, at
 *     position 2) are listed under that literal; a lookup reads its own segment at that position.
 *     The position most entries fix is indexed first, then the next one for the entries left, and
 *     so on; entries fixing none (`/api/{id}`, regex-only differences) are tried in order.
 * Header conditions are not indexed: entries differing only by them share their lists (a canary and
 * its stable route, a few API versions), tried in order, the one with more conditions first. An entry
 * without any holds null, so a lookup that meets none reads no header: tables without header conditions
 * pay nothing for them (docs/benchmarks.md has the canary's cost).
 * Each list keeps bucket order, and a list is read only while its ranks can still beat the best
 * match found so far, so the winner is exactly the one a scan of the whole bucket would pick.
 *
 * Measured: lookups spread over 10,000 routes cost several times those over 10 routes, but lookups
 * of 10 routes cost the same in a table of 10 or of 10,000. The difference is memory (the nodes and
 * matchers of 10,000 routes are rarely in the CPU cache), not work; hence compact lookup nodes (a
 * string of first characters rather than a Map per node) and few per-lookup allocations.
 */
import { hostMatcher, normalizeHost } from '../compile/index.js';
import type { CompiledListenPath, CompiledRoute, HeaderCondition, HostMatcher } from '../compile/index.js';
import { headersHold } from './header-match.js';
import { allTurns } from '../turns.js';
import type { ConsideredRoute, PriorityRule, RequestFacts, RequestHeaders, RouteMatch, RoutingTable } from './index.js';

interface Entry {
  route: CompiledRoute;
  /** Position in its bucket's priority order. */
  rank: number;
  methods: ReadonlySet<string> | null;
  /** null when the route has no hosts condition (it never needs the request's host). */
  hostOk: HostMatcher | null;
  /** null when the route has no header condition (the lookup then reads no header). */
  headers: readonly HeaderCondition[] | null;
  listenPath: CompiledListenPath | null;
}

/**
 * Entries of one bucket (or of one host in it), in bucket order: a plain list when no segment index
 * applies (the common case, kept flat: with 10,000 hosts, one pointer less to chase is measurable).
 */
type Candidates = readonly Entry[] | IndexedCandidates;

/** Entries split so that a lookup reads only those that can match. */
interface IndexedCandidates {
  /** Entries no index applies to, in bucket order. */
  scan: readonly Entry[];
  /** Each index covers entries the earlier ones do not. */
  bySegment: readonly SegmentIndex[];
}

/** Entries with a literal path segment at position `segment`, listed under that literal in bucket order. */
interface SegmentIndex {
  /** 0-based position of the segment after the leading `/`. */
  segment: number;
  lists: ReadonlyMap<string, readonly Entry[]>;
}

/** The routes of one literal prefix. */
interface Bucket {
  /** Every entry in bucket order (read by `explain` only; lookups use the indexes below). */
  entries: readonly Entry[];
  /** Entries whose hosts are exact names only, under each of their hosts; null when none. */
  byHost: ReadonlyMap<string, Candidates> | null;
  /** Every other entry (no hosts condition, or a wildcard among its hosts); every entry when `byHost` is null. */
  rest: Candidates;
}

/** Build-time node. */
interface Node {
  /** Label of the edge from the parent. */
  edge: string;
  /** Children keyed by the first character of their edge. */
  children: Map<string, Node>;
  bucket: Entry[] | null;
}

/**
 * Lookup-time node: read-only and compact, never modified once built, so an updated table shares
 * every node off the paths to the buckets it changed (a node holds no link to its ancestors' buckets:
 * the walk down collects them).
 */
interface Frozen {
  readonly edge: string;
  /** First character of each child's edge, index-aligned with `children`. */
  readonly firsts: string;
  readonly children: readonly Frozen[];
  readonly bucket: Bucket | null;
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

const isExact = (r: CompiledRoute): boolean => r.listenPath !== null && !r.listenPath.wildcard;
const byCodeUnits = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Bucket order, one rule after the other (negative: `a` first); `explain` names the rule that decided. */
const BUCKET_ORDER: ReadonlyArray<readonly [PriorityRule, (a: CompiledRoute, b: CompiledRoute) => number]> = [
  ['more_conditions', (a, b) => b.conditionCount - a.conditionCount],
  ['exact_listen_path', (a, b) => Number(isExact(b)) - Number(isExact(a))],
  ['name_order', (a, b) => byCodeUnits(a.name, b.name)],
  ['id_order', (a, b) => byCodeUnits(a.id, b.id)],
];

function compareRoutes(a: CompiledRoute, b: CompiledRoute): number {
  for (const [, compare] of BUCKET_ORDER) {
    const order = compare(a, b);
    if (order !== 0) return order;
  }
  return 0;
}

function compareEntries(a: Entry, b: Entry): number {
  return compareRoutes(a.route, b.route);
}

/** Why `winner` comes before `loser` (both matching one request): the first priority rule that separates them. */
export function outrankedBecause(winner: CompiledRoute, loser: CompiledRoute): PriorityRule {
  const prefix = (r: CompiledRoute) => r.listenPath?.literalPrefix.length ?? 0;
  if (prefix(winner) !== prefix(loser)) return 'longer_prefix';
  return BUCKET_ORDER.find(([, compare]) => compare(winner, loser) < 0)?.[0] ?? 'id_order';
}

/** A host pattern without `*` matches exactly that (normalised) host and nothing else. */
function isExactHost(pattern: string): boolean {
  return !pattern.includes('*');
}

/** The listen_path's literal segments (null: a parameter); [] for a route without listen_path. */
function segmentsOf(listenPath: CompiledListenPath | null): readonly (string | null)[] {
  return listenPath?.segments ?? [];
}

/**
 * Index `entries` (in bucket order) by literal segments at positions >= `from` (the positions
 * before lie in the shared prefix): repeatedly the position that the most remaining entries fix.
 */
function toCandidates(entries: readonly Entry[], from: number): Candidates {
  const bySegment: SegmentIndex[] = [];
  let remaining = entries;
  for (;;) {
    const counts: number[] = [];
    for (const entry of remaining) {
      const segments = segmentsOf(entry.listenPath);
      for (let k = from; k < segments.length; k++) if (segments[k] !== null) counts[k] = (counts[k] ?? 0) + 1;
    }
    let segment = -1;
    for (let k = from; k < counts.length; k++) if ((counts[k] ?? 0) > (counts[segment] ?? 0)) segment = k;
    if (segment < 0) return bySegment.length === 0 ? remaining : { scan: remaining, bySegment };
    const lists = new Map<string, Entry[]>();
    const left: Entry[] = [];
    for (const entry of remaining) {
      const literal = segmentsOf(entry.listenPath)[segment];
      if (literal === undefined || literal === null) {
        left.push(entry);
        continue;
      }
      const list = lists.get(literal);
      if (list) list.push(entry);
      else lists.set(literal, [entry]);
    }
    bySegment.push({ segment, lists });
    remaining = left;
  }
}

function slashCount(s: string): number {
  let n = 0;
  for (let i = s.indexOf('/'); i >= 0; i = s.indexOf('/', i + 1)) n++;
  return n;
}

function toBucket(unsorted: Entry[]): Bucket {
  // A copy of the exact length: the list was grown by push (room for 17 entries where most buckets
  // hold one), and a data plane keeps a bucket per route prefix.
  const entries = unsorted.slice().sort(compareEntries);
  entries.forEach((entry, rank) => {
    entry.rank = rank;
  });
  // Entries of a bucket share its key, the literal prefix: its `/`s end the segments it fixes for all.
  const from = slashCount(entries[0].listenPath?.literalPrefix ?? '');
  const indexed = (e: Entry): boolean => e.route.hosts.length > 0 && e.route.hosts.every(isExactHost);
  if (!entries.some(indexed)) return { entries, byHost: null, rest: toCandidates(entries, from) };
  const hosted = new Map<string, Entry[]>();
  const rest: Entry[] = [];
  for (const entry of entries) {
    if (!indexed(entry)) {
      rest.push(entry);
      continue;
    }
    for (const host of new Set(entry.route.hosts)) {
      const list = hosted.get(host);
      if (list) list.push(entry);
      else hosted.set(host, [entry]);
    }
  }
  const byHost = new Map<string, Candidates>();
  for (const [host, list] of hosted) byHost.set(host, toCandidates(list, from));
  return { entries, byHost, rest: toCandidates(rest, from) };
}

/** One lookup's request and best match so far. */
interface Search {
  readonly path: string;
  readonly method: string;
  readonly rawHost: string | undefined;
  readonly headers: RequestHeaders | undefined;
  /** Normalised on first use: most routes have no hosts condition. */
  host: string | undefined;
  /** Rank of `found`; entries ranked at or after it cannot win. */
  rank: number;
  found: RouteMatch | null;
}

function searchOf(req: RequestFacts): Search {
  return { path: req.path, method: req.method.toUpperCase(), rawHost: req.host, headers: req.headers, host: undefined, rank: Infinity, found: null };
}

function hostOf(search: Search): string {
  return (search.host ??= normalizeHost(search.rawHost));
}

/** The request path's segment at `position` (0-based after the leading `/`), or undefined. */
function segmentAt(path: string, position: number): string | undefined {
  let start = 1;
  for (let k = 0; k < position; k++) {
    const slash = path.indexOf('/', start);
    if (slash < 0) return undefined;
    start = slash + 1;
  }
  const end = path.indexOf('/', start);
  return end < 0 ? path.slice(start) : path.slice(start, end);
}

function isList(candidates: Candidates): candidates is readonly Entry[] {
  return Array.isArray(candidates);
}

/** The first entry of `list` (bucket order) that matches and outranks the best so far becomes the best. */
function tryList(list: readonly Entry[], search: Search): void {
  for (let i = 0; i < list.length; i++) {
    const entry = list[i];
    if (entry.rank >= search.rank) return;
    if (entry.methods !== null && !entry.methods.has(search.method)) continue;
    if (entry.hostOk !== null && !entry.hostOk(hostOf(search))) continue;
    if (entry.headers !== null && !headersHold(entry.headers, search.headers)) continue;
    const { route, listenPath } = entry;
    if (listenPath === null) {
      search.found = { route, params: {}, matched: '' };
    } else {
      const m = listenPath.match(search.path);
      if (m === null) continue;
      search.found = { route, params: m.params, matched: m.matched };
    }
    search.rank = entry.rank;
    return;
  }
}

/** Tries every list of `candidates` that can hold a match for the request. */
function tryCandidates(candidates: Candidates, search: Search): void {
  if (isList(candidates)) {
    tryList(candidates, search);
    return;
  }
  tryList(candidates.scan, search);
  for (let i = 0; i < candidates.bySegment.length; i++) {
    const index = candidates.bySegment[i];
    const segment = segmentAt(search.path, index.segment);
    const list = segment === undefined ? undefined : index.lists.get(segment);
    if (list !== undefined) tryList(list, search);
  }
}

const NO_CHILDREN: readonly Frozen[] = Object.freeze([]);

/**
 * Sorts every bucket (iterative: keys may be long). A leaf (most nodes: one per route prefix) shares one
 * empty child list, and another node's list is made at its length, not grown by push (room for 17).
 */
function* freeze(root: Node, turn: number): Generator<void, Frozen> {
  const out = (node: Node) => ({
    edge: node.edge,
    firsts: [...node.children.keys()].join(''),
    children: node.children.size === 0 ? NO_CHILDREN : new Array<Frozen>(node.children.size),
    bucket: node.bucket ? toBucket(node.bucket) : null,
  });
  const frozenRoot = out(root);
  const stack: Array<[Node, ReturnType<typeof out>]> = [[root, frozenRoot]];
  let visited = 0;
  while (stack.length > 0) {
    if (++visited % turn === 0) yield;
    const [node, frozen] = stack.pop()!;
    let k = 0;
    for (const child of node.children.values()) {
      const frozenChild = out(child);
      (frozen.children as Frozen[])[k++] = frozenChild;
      stack.push([child, frozenChild]);
    }
  }
  return frozenRoot;
}

/**
 * Walks `path` down the tree (the deepest node whose key is a prefix of `path`) and puts the buckets
 * passed into `out`, shortest prefix first; returns how many.
 */
function walk(root: Frozen, path: string, out: Bucket[]): number {
  let node = root;
  let n = 0;
  if (node.bucket !== null) out[n++] = node.bucket;
  let i = 0;
  while (i < path.length) {
    const k = node.firsts.indexOf(path[i]);
    if (k < 0) break;
    const child = node.children[k];
    if (!path.startsWith(child.edge, i)) break;
    i += child.edge.length;
    node = child;
    if (node.bucket !== null) out[n++] = node.bucket;
  }
  return n;
}

/** Every condition of `entry` checked on its own (explain only: `tryList` stops at the first failure). */
function consider(entry: Entry, search: Search): ConsideredRoute {
  const failed: ConsideredRoute['failed'] = [];
  if (entry.methods !== null && !entry.methods.has(search.method)) failed.push('method');
  if (entry.hostOk !== null && !entry.hostOk(hostOf(search))) failed.push('host');
  if (entry.headers !== null && !headersHold(entry.headers, search.headers)) failed.push('headers');
  const m = entry.listenPath === null ? { params: {}, matched: '' } : entry.listenPath.match(search.path);
  if (m === null) failed.push('path');
  return { route: entry.route, failed, match: m === null || failed.length > 0 ? null : { route: entry.route, ...m } };
}

function entryOf(route: CompiledRoute): Entry {
  return {
    route,
    rank: 0,
    methods: route.methods,
    hostOk: route.hosts.length > 0 ? hostMatcher(route.hosts) : null,
    headers: route.headers.length > 0 ? route.headers : null,
    listenPath: route.listenPath,
  };
}

const keyOf = (route: CompiledRoute): string => route.listenPath?.literalPrefix ?? '';

/**
 * Build an immutable table. `path` given to `match` must be the normalised request path
 * (normalizePath): that is the path the listen_paths are compared with and the one forwarded.
 */
export function buildRoutingTable(routes: readonly CompiledRoute[]): RoutingTable {
  return allTurns(buildRoutingTableInTurns(routes));
}

/**
 * buildRoutingTable, yielding after every `turn` routes put in the tree and every `turn` nodes frozen: a serving
 * data plane's full snapshot (snapshot-holder.ts applyInTurns; in one piece it grows with the routes).
 */
export function* buildRoutingTableInTurns(routes: readonly CompiledRoute[], turn = Infinity): Generator<void, RoutingTable> {
  const building = newNode('');
  for (let i = 0; i < routes.length; i++) {
    const route = routes[i]!;
    (nodeFor(building, keyOf(route)).bucket ??= []).push(entryOf(route));
    if ((i + 1) % turn === 0) yield;
  }
  return tableOf(yield* freeze(building, turn), routes.length);
}

/**
 * The tree of every table, for updateRoutingTable; kept off the RoutingTable interface so that
 * callers (and POST /explain) see only match and explain.
 */
const roots = new WeakMap<RoutingTable, Frozen>();

/**
 * `previous` without the routes `removed` (matched by id in the bucket of their literal prefix) and
 * with `added`: a changed route is removed as its old object and added as its new one. Only the
 * buckets of those prefixes are rebuilt and only the nodes on the way to them copied; every other
 * node and bucket is shared with `previous`, which stays valid and unchanged (requests may still be
 * using it). The result answers `match` and `explain` exactly as buildRoutingTable of the resulting
 * route list does (routing.property.test.ts). Throws when a removed route is not in `previous`.
 */
export function updateRoutingTable(previous: RoutingTable, removed: readonly CompiledRoute[], added: readonly CompiledRoute[]): RoutingTable {
  let root = roots.get(previous);
  if (root === undefined) throw new Error('updateRoutingTable: the previous table was not built by buildRoutingTable');
  const byKey = new Map<string, { removed: Set<string>; added: CompiledRoute[] }>();
  const at = (key: string) => byKey.get(key) ?? byKey.set(key, { removed: new Set(), added: [] }).get(key)!;
  for (const route of removed) at(keyOf(route)).removed.add(route.id);
  for (const route of added) at(keyOf(route)).added.push(route);
  for (const [key, change] of byKey) {
    const old = find(root, key)?.entries ?? [];
    // Fresh entries: toBucket ranks them in place, and the old ones still serve `previous`.
    const entries = old.filter((e) => !change.removed.has(e.route.id)).map((e) => ({ ...e, rank: 0 }));
    if (old.length - entries.length !== change.removed.size) {
      const missing = [...change.removed].filter((id) => !old.some((e) => e.route.id === id));
      throw new Error(`updateRoutingTable: route ${missing.join(', ')} is not in the table`);
    }
    for (const route of change.added) entries.push(entryOf(route));
    root = put(root, key, entries.length > 0 ? toBucket(entries) : null);
  }
  return tableOf(root, previous.size - removed.length + added.length);
}

/** The bucket at exactly `key`, if any. */
function find(root: Frozen, key: string): Bucket | null {
  let node = root;
  let i = 0;
  while (i < key.length) {
    const k = node.firsts.indexOf(key[i]);
    if (k < 0) return null;
    node = node.children[k];
    if (!key.startsWith(node.edge, i)) return null;
    i += node.edge.length;
  }
  return i === key.length ? node.bucket : null;
}

const withChild = (node: Frozen, k: number, child: Frozen | null): Frozen =>
  child !== null
    ? { ...node, children: node.children.map((c, j) => (j === k ? child : c)) }
    : { ...node, firsts: node.firsts.slice(0, k) + node.firsts.slice(k + 1), children: node.children.filter((_, j) => j !== k) };

/**
 * A non-root node as buildRoutingTable would shape it: none without a bucket and children, none
 * without a bucket and with one child (merged into it), so the tree stays the one built from scratch.
 */
function tidy(node: Frozen): Frozen | null {
  if (node.bucket !== null || node.children.length > 1) return node;
  if (node.children.length === 0) return null;
  const only = node.children[0];
  return { ...only, edge: node.edge + only.edge };
}

/** A copy of the tree with `bucket` at `key` (null: none), copying only the nodes from the root to it. */
function put(root: Frozen, key: string, bucket: Bucket | null): Frozen {
  const path: Array<[Frozen, number]> = [];
  let node = root;
  let i = 0;
  let replacement: Frozen | null;
  for (;;) {
    if (i === key.length) {
      replacement = { ...node, bucket };
      break;
    }
    const k = node.firsts.indexOf(key[i]);
    if (k < 0) {
      if (bucket === null) return root;
      const leaf: Frozen = { edge: key.slice(i), firsts: '', children: NO_CHILDREN, bucket };
      replacement = { ...node, firsts: node.firsts + key[i], children: [...node.children, leaf] };
      break;
    }
    const child = node.children[k];
    const common = commonPrefixLength(child.edge, key.slice(i, i + child.edge.length));
    if (common < child.edge.length) {
      if (bucket === null) return root;
      // `key` ends inside the child's edge or leaves it: split the edge, as nodeFor does.
      const lower: Frozen = { ...child, edge: child.edge.slice(common) };
      const mid: Frozen =
        i + common === key.length
          ? { edge: child.edge.slice(0, common), firsts: lower.edge[0], children: [lower], bucket }
          : {
              edge: child.edge.slice(0, common),
              firsts: lower.edge[0] + key[i + common],
              children: [lower, { edge: key.slice(i + common), firsts: '', children: NO_CHILDREN, bucket }],
              bucket: null,
            };
      replacement = withChild(node, k, mid);
      break;
    }
    path.push([node, k]);
    node = child;
    i += child.edge.length;
  }
  // `replacement` stands for the last node reached; copy its ancestors up to the root.
  if (path.length === 0) return replacement;
  replacement = tidy(replacement);
  for (let d = path.length - 1; d >= 0; d--) {
    const [parent, k] = path[d];
    const copy = withChild(parent, k, replacement);
    replacement = d === 0 ? copy : tidy(copy);
  }
  return replacement!;
}

function tableOf(root: Frozen, size: number): RoutingTable {
  // The buckets a walk passes, reused by every lookup of this table: lookups are synchronous and
  // never re-entered, and a per-lookup array is an allocation on every request.
  const passed: Bucket[] = [];
  const table: RoutingTable = {
    size,
    // No catch-all: any request input matches or not (percent-decoding is safe), so a throw here is a bug,
    // which the caller answers as a logged 500 rather than a 404 that would hide it.
    match(req: RequestFacts): RouteMatch | null {
      const path = req.path;
      const search = searchOf(req);
      for (let n = walk(root, path, passed) - 1; n >= 0; n--) {
        const bucket = passed[n];
        const hosted = bucket.byHost?.get(hostOf(search));
        if (hosted !== undefined) tryCandidates(hosted, search);
        tryCandidates(bucket.rest, search);
        if (search.found !== null) return search.found;
      }
      return null;
    },
    explain(req: RequestFacts): ConsideredRoute[] {
      const search = searchOf(req);
      const considered: ConsideredRoute[] = [];
      for (let n = walk(root, req.path, passed) - 1; n >= 0; n--) {
        for (const entry of passed[n].entries) considered.push(consider(entry, search));
      }
      return considered;
    },
  };
  roots.set(table, root);
  return table;
}
