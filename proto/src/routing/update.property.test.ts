/**
 * updateRoutingTable agrees with buildRoutingTable: over random tables and random sequences of
 * deltas (routes removed, replaced, added, in prefixes that share, split and empty tree nodes), the
 * incrementally updated table answers every request, and `explain`, exactly as a table built from
 * scratch from the resulting route list; and the table it started from still answers as before. A table
 * built in turns (a serving data plane's full snapshot) answers as one built at once.
 */
import fc from 'fast-check';
import { compileApi, type CompiledRoute } from '../compile/index.js';
import { parseApiDefinition } from '../definition/index.js';
import { buildRoutingTable, buildRoutingTableInTurns, updateRoutingTable, type RequestFacts, type RoutingTable } from './index.js';

const PARAMS = { seed: 20261124, numRuns: 300 };

const NAMES = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
// Prefixes nest ('/a' in '/a/' in '/a/b'), diverge inside an edge ('/ab', '/abc') and share a bucket
// ('/a/{id}…' all sit in '/a/'), so updates split, empty and merge nodes.
const PATHS = [
  '/a/*',
  '/a',
  '/a/b/*',
  '/a/b',
  '/ab/*',
  '/abc',
  '/a/bc/*',
  '/a/{id}',
  '/a/{id}/c/*',
  '/a/{id}/d',
  '/a/x/{id}',
  '/{x}',
  '/*',
  '/',
  '/b/c/{n:[0-9]+}',
  undefined,
];
const HOSTS = [[], ['h.test'], ['g.test'], ['*.w.test'], ['h.test', 'g.test'], ['h.test', '*.w.test']];
const METHODS = [['ALL'], ['GET'], ['GET', 'POST']];
// Routes on one path and hosts that differ only by their header conditions, and conditions that overlap.
const HEADERS: Array<Record<string, string[]> | undefined> = [
  undefined,
  undefined,
  { 'X-C': ['1'] },
  { 'x-c': ['2'] },
  { 'x-c': ['1', '2'], 'X-V': ['a'] },
  { 'x-v': ['a', 'b'] },
];

const spec = fc.record({
  path: fc.constantFrom(...PATHS),
  hosts: fc.constantFrom(...HOSTS),
  methods: fc.constantFrom(...METHODS),
  headers: fc.constantFrom(...HEADERS),
});
type Spec = typeof spec extends fc.Arbitrary<infer S> ? S : never;

/** A route without listen_path needs some other condition: such a spec with neither gets methods POST. */
const route = (name: string, s: Spec): CompiledRoute =>
  compileApi(
    parseApiDefinition({
      name,
      hosts: s.hosts,
      proxy: {
        ...(s.path ? { listen_path: s.path } : {}),
        methods: !s.path && s.hosts.length === 0 && !s.headers && s.methods[0] === 'ALL' ? ['POST'] : s.methods,
        match_headers: s.headers,
        upstreams: { targets: [{ target: 'http://up.test' }] },
      },
    }),
  );

/** Per name: absent (null) or the route's spec. */
const config = fc.tuple(...NAMES.map(() => fc.option(spec, { nil: null })));
/** Per name: keep it as it is (undefined), remove it (null), or set it to a spec. */
const delta = fc.tuple(...NAMES.map(() => fc.oneof(fc.constant(undefined), fc.constant(null), spec)));

const request = fc.record({
  path: fc.constantFrom(
    '/',
    '/a',
    '/a/',
    '/a/b',
    '/a/b/x',
    '/ab',
    '/ab/q',
    '/abc',
    '/abcd',
    '/a/bc',
    '/a/bc/1',
    '/a/7',
    '/a/7/c',
    '/a/7/c/z',
    '/a/7/d',
    '/a/x/9',
    '/b/c/12',
    '/b/c/x',
    '/zz',
    '/q/r/s',
  ),
  host: fc.constantFrom(undefined, 'h.test', 'g.test', 'x.w.test', 'H.TEST:8080', 'other.test'),
  method: fc.constantFrom('GET', 'POST', 'put'),
  headers: fc.constantFrom(
    undefined,
    {},
    { 'x-c': '1' },
    { 'x-c': '2' },
    { 'x-c': '3, 2' },
    { 'x-c': '1', 'x-v': 'b' },
    { 'x-c': '2', 'x-v': 'a,b' },
    { 'x-v': 'a' },
  ),
});
const requests = fc.array(request, { minLength: 20, maxLength: 20 });

/** Everything a caller can observe of one request. */
function answers(table: RoutingTable, reqs: readonly RequestFacts[]): unknown {
  return {
    size: table.size,
    per: reqs.map((req) => {
      const m = table.match(req);
      return {
        match: m && { id: m.route.id, params: m.params, matched: m.matched },
        explain: table.explain(req).map((c) => ({ id: c.route.id, failed: c.failed, match: c.match && { params: c.match.params, matched: c.match.matched } })),
      };
    }),
  };
}

describe('updateRoutingTable', () => {
  test('answers match and explain exactly as a table built from scratch, after each delta of a sequence; the previous table is unchanged', () => {
    fc.assert(
      fc.property(config, fc.array(delta, { minLength: 1, maxLength: 4 }), requests, (initial, deltas, reqs) => {
        let routes = new Map<string, CompiledRoute>();
        initial.forEach((s, i) => {
          if (s) routes.set(NAMES[i], route(NAMES[i], s));
        });
        let table = buildRoutingTable([...routes.values()]);
        for (const d of deltas) {
          const before = answers(table, reqs);
          const next = new Map(routes);
          const removed: CompiledRoute[] = [];
          const added: CompiledRoute[] = [];
          d.forEach((change, i) => {
            const name = NAMES[i];
            if (change === undefined) return;
            const old = routes.get(name);
            if (old) removed.push(old);
            next.delete(name);
            if (change === null) return;
            const fresh = route(name, change);
            added.push(fresh);
            next.set(name, fresh);
          });
          const updated = updateRoutingTable(table, removed, added);
          expect(answers(updated, reqs)).toEqual(answers(buildRoutingTable([...next.values()]), reqs));
          expect(answers(table, reqs)).toEqual(before);
          routes = next;
          table = updated;
        }
      }),
      PARAMS,
    );
  });

  test('match elects the first route, in the order explain considers them (longest prefix, then bucket order), whose every condition holds', () => {
    // explain reads every entry of a bucket; match reads only the host and segment indexes' lists.
    fc.assert(
      fc.property(config, requests, (specs, reqs) => {
        const table = buildRoutingTable(specs.flatMap((s, i) => (s ? [route(NAMES[i], s)] : [])));
        for (const req of reqs) {
          const first = table.explain(req).find((c) => c.failed.length === 0);
          expect(table.match(req)?.route.id).toBe(first?.route.id);
        }
      }),
      PARAMS,
    );
  });

  test('a table built in turns (buildRoutingTableInTurns, any turn size) answers as one built at once, and yields between its turns', () => {
    fc.assert(
      fc.property(config, fc.integer({ min: 1, max: 4 }), requests, (specs, turn, reqs) => {
        const routes = specs.flatMap((s, i) => (s ? [route(NAMES[i], s)] : []));
        const steps = buildRoutingTableInTurns(routes, turn);
        let turns = 0;
        let step = steps.next();
        for (; !step.done; step = steps.next()) turns++;
        // At least one turn per `turn` routes put in the tree (the freezing of its nodes takes more).
        expect(turns).toBeGreaterThanOrEqual(Math.floor(routes.length / turn));
        expect(answers(step.value, reqs)).toEqual(answers(buildRoutingTable(routes), reqs));
      }),
      PARAMS,
    );
  });

  test('refuses to remove a route the table does not hold', () => {
    const table = buildRoutingTable([route('a', { path: '/a/*', hosts: [], methods: ['ALL'], headers: undefined })]);
    expect(() => updateRoutingTable(table, [route('b', { path: '/a/*', hosts: [], methods: ['ALL'], headers: undefined })], [])).toThrow(
      'route api:b is not in the table',
    );
  });
});
