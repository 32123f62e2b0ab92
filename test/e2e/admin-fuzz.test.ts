/**
 * Generated admin bodies against a real CP process: 10,000 seeded bodies, valid ones
 * and hostile ones (deep nesting, huge strings, wrong types, `__proto__`/`constructor` keys, 1e309,
 * broken JSON), sent as creates, merge-patches and OAuth-server writes. Properties: every answer is
 * 2xx or 4xx, a refused write leaves DATA_DIR/store.json byte for byte as it was, the CP stays
 * up, and the store it leaves behind loads again after a restart with the same content.
 * Seeded, so a failure prints the seed and path that reproduce it.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { createAdminClient, type AdminClient } from '../helpers/admin-client.js';
import { startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';

const RUNS = 10_000;
const SEED = 20261123;

let cp: ControlPlane;
let admin: AdminClient;

beforeAll(async () => {
  cp = await startControlPlane({ name: 'cp-fuzz' });
  admin = await createAdminClient(cp);
  // One API and one OAuth server to patch, so PUT/PATCH reach validation instead of 404.
  expect((await admin.createApi({ name: 'seed', proxy: { listen_path: '/seed/*', upstreams: { targets: [{ target: 'http://127.0.0.1:9' }] } } })).status).toBe(
    201,
  );
  expect(
    (
      await admin.createOAuthServer({
        name: 'seed-auth',
        oauth_endpoints: { token: { listen_path: '/seed-auth/token', upstreams: { targets: [{ target: 'http://127.0.0.1:9/token' }] } } },
        token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: 'seed-secret-of-32-bytes-or-longer' }] },
      })
    ).status,
  ).toBe(201);
});

afterAll(async () => {
  await cp?.dispose();
});

/** The file store's base and journal: a refused write changes neither. */
const storeFiles = async () => (await Promise.all(['store.json', 'store.journal'].map((f) => readFile(join(cp.dataDir, f), 'utf8')))).join('\n--\n');

/** Values a careless or hostile client sends where a string, number, list or object belongs. */
const hostile: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }),
  fc.string({ maxLength: 40 }),
  fc.constantFrom(
    '',
    ' ',
    '..',
    '/../..',
    '/a/{',
    '{id:(}',
    'http://',
    'http://[::1',
    'javascript:alert(1)',
    '\u0000',
    'a\r\nX-Injected: 1',
    '%2e%2e',
    '*',
    'ALL',
    '__proto__',
  ),
  fc.constantFrom(0, -1, 1.5, Number.MAX_SAFE_INTEGER, 1e21, -0),
  fc.constant('x'.repeat(70_000)),
  fc.constant(null),
);

const validTarget = fc.constantFrom('http://127.0.0.1:9', 'https://up.example:8443/base', 'http://{svc}:9000');
/** Under a random first segment, so valid paths rarely collide with an earlier write's route. */
const listenPath = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .tuple(fc.stringMatching(/^[a-z]{4,10}$/), fc.constantFrom('/*', '', '/{svc}/*', '/x/{id:[0-9]+}', '/a/../b'))
      .map(([head, tail]) => `/${head}${tail}`),
  },
  { weight: 1, arbitrary: fc.constantFrom('/', '/*', '/a/*', '/{svc}/*') },
  { weight: 1, arbitrary: fc.stringMatching(/^\/[a-z0-9/{}*:.-]{0,20}$/) },
);

/** Mostly `valid`, sometimes hostile: a body then holds one or two bad members, not only bad ones. */
const or = <T>(valid: fc.Arbitrary<T>) => fc.oneof({ weight: 12, arbitrary: valid }, { weight: 1, arbitrary: hostile });

/** A definition that is plausibly valid, with one member replaced by something hostile now and then. */
const apiBody = fc
  .record({
    name: or(fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/)),
    proxy: fc.record({
      listen_path: or(listenPath),
      strip_path: or(fc.boolean()),
      methods: or(fc.oneof(fc.constant(['GET']), fc.array(fc.constantFrom('GET', 'POST', 'ALL', 'get', 'B@D'), { maxLength: 3 }))),
      upstreams: or(
        fc.record({
          balancing: fc.constantFrom('roundrobin', 'roundrobin', 'weight', 'roundrobin', 'random'),
          targets: fc.array(fc.record({ target: or(validTarget), weight: or(fc.integer({ min: 0, max: 20 })) }), { minLength: 1, maxLength: 3 }),
        }),
      ),
      forwarding_timeouts: or(fc.record({ response_header_timeout: fc.constantFrom('1s', '250ms', '30s', '2m', '0s', '-1s', '1e309s', 'soon') })),
    }),
    hosts: or(fc.array(fc.constantFrom('a.example', '*.example', 'EXAMPLE.com', 'b.example', 'c.example', '', 'bad host', '*'), { maxLength: 2 })),
    plugins: or(fc.array(fc.record({ name: fc.constantFrom('oauth2', 'cors', 'nope'), enabled: fc.boolean(), config: hostile }), { maxLength: 2 })),
  })
  .map((body) => body as Record<string, unknown>);

/** Bodies no JSON encoder produces: prototype keys, out-of-range numbers, deep nesting, broken syntax. */
const rawText: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '{"__proto__": {"admin": true}, "name": "p1", "proxy": {"listen_path": "/p1/*", "upstreams": {"targets": [{"target": "http://127.0.0.1:9"}]}}}',
    '{"constructor": {"prototype": {"polluted": 1}}, "name": "p2", "proxy": {"listen_path": "/p2", "upstreams": {"targets": [{"target": "http://127.0.0.1:9"}]}}}',
    '{"name": "p3", "proxy": {"__proto__": {"listen_path": "/p3"}, "upstreams": {"targets": [{"target": "http://127.0.0.1:9", "weight": 1e309}]}}}',
    '{"name": 1e309}',
    '{"name": "n", "proxy": {"listen_path": "/n", "upstreams": {"targets": [{"target": "http://127.0.0.1:9", "weight": -1e309}]}}}',
    '{"name": "dup", "name": "dup2"}',
    '{',
    '',
    'null',
    '[]',
    '"string"',
    '{"name": "\\ud800"}',
  ),
  fc.integer({ min: 10, max: 5_000 }).map((depth) => `{"name": "deep", "proxy": ${'{"a": '.repeat(depth)}1${'}'.repeat(depth)}}`),
  fc.integer({ min: 10, max: 5_000 }).map((depth) => '['.repeat(depth) + ']'.repeat(depth)),
  fc.string({ maxLength: 60 }),
);

type Write = { method: string; path: string; body: { json: unknown } | { raw: string } };

/** fast-check prints counterexamples with this: the first 300 characters, not a 70 KB string. */
function described(w: Write): Write {
  const text = 'raw' in w.body ? w.body.raw : JSON.stringify(w.body.json);
  const shown = text.length > 300 ? `${text.slice(0, 300)}… (${text.length} chars)` : text;
  return Object.assign(w, { [fc.toStringMethod]: () => `${w.method} ${w.path} ${shown}` });
}

const write: fc.Arbitrary<Write> = fc
  .oneof(
    { weight: 4, arbitrary: apiBody.map((b): Write => ({ method: 'POST', path: '/apis', body: { json: b } })) },
    { weight: 2, arbitrary: apiBody.map((b): Write => ({ method: 'PATCH', path: '/apis/seed', body: { json: { ...b, name: 'seed' } } })) },
    { weight: 1, arbitrary: apiBody.map((b): Write => ({ method: 'PUT', path: '/apis/seed', body: { json: { ...b, name: 'seed' } } })) },
    { weight: 2, arbitrary: rawText.map((raw): Write => ({ method: 'POST', path: '/apis', body: { raw } })) },
    {
      weight: 2,
      arbitrary: fc
        .record({
          name: fc.oneof(fc.stringMatching(/^[a-z]{1,8}$/), hostile),
          oauth_endpoints: fc.oneof(fc.record({ token: apiBody.map((b) => b.proxy) }), hostile),
          token_strategy: fc.oneof(fc.record({ name: fc.constantFrom('jwt', 'storage', 'magic'), settings: hostile, leeway: hostile }), hostile),
        })
        .map((b): Write => ({ method: 'POST', path: '/oauth/servers', body: { json: b } })),
    },
  )
  .map(described);

test(`${RUNS} generated admin writes: only 2xx/4xx, refused writes leave store.json and its journal as they were, the CP stays up and reloads what it stored`, async () => {
  let before = await storeFiles();
  const statuses = new Map<number, number>();
  await fc.assert(
    fc.asyncProperty(write, async ({ method, path, body }) => {
      const res = await admin.request(method, path, 'raw' in body ? { rawBody: body.raw } : { body: body.json });
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      if (!(res.status < 300 || (res.status >= 400 && res.status < 500))) throw new Error(`answered ${res.status}: ${res.text.slice(0, 200)}`);
      const after = await storeFiles();
      if (res.status >= 400) expect(after).toBe(before);
      before = after;
    }),
    { numRuns: RUNS, seed: SEED, endOnFailure: true },
  );
  // Both outcomes were exercised, or the generators say nothing.
  const accepted = [...statuses].filter(([s]) => s < 300).reduce((n, [, c]) => n + c, 0);
  expect(accepted).toBeGreaterThan(50);
  expect(RUNS - accepted).toBeGreaterThan(RUNS / 2);
  expect((await admin.readyz()).status).toBe(200);

  // What the fuzzing left loads again after a restart, with the same content.
  const apis = (await admin.listApis()).body;
  const servers = (await admin.listOAuthServers()).body;
  const file = JSON.parse(await readFile(join(cp.dataDir, 'store.json'), 'utf8'));
  expect(Array.isArray(file.apis)).toBe(true);
  await cp.stop();
  await cp.restart();
  const again = await createAdminClient(cp);
  expect((await again.listApis()).body).toEqual(apis);
  expect((await again.listOAuthServers()).body).toEqual(servers);
}, 600_000);
