/**
 * Incremental propagation agrees with a full rebuild: over random sequences of upserts and deletes,
 * (1) the delta the CP takes between two versions, sent through the real wire encoding and applied by
 * a data plane on top of the previous content, gives the same definitions and hash as the new version;
 * (2) a compile that reuses every unchanged definition's result (CompileCache) gives the same
 * verdicts and routes as compiling fresh copies of everything.
 */
import fc from 'fast-check';
import { collectGarbage } from '../../../test/helpers/collect-garbage.js';
import { loadGatehouseProto } from '../grpc.js';
import { compileDefinitions, createCompileCache, routeConflictKey, type CompiledConfig, type DefinitionKindName } from '../compile/index.js';
import { applyChanges, indexConfig, indexRoutes, type ConfigIndex, type DefinitionChange } from '../compile/incremental.js';
import { parseApiDefinition, parseBasicAuthCredential, parseKeyAuthCredential, parseOAuthServer } from '../definition/index.js';
import { legacyHashApiKey } from '../api-key.js';
import type { Definitions } from '../definition/types.js';
import {
  applyDeltaMessage,
  definitionsHash,
  deriveDefinitions,
  fromSnapshotMessage,
  keepDefinitionHashes,
  prepareForDeltas,
  toDeltaMessage,
  toSnapshotMessage,
  type DefinitionEdit,
  type DeltaMessage,
  type SnapshotContent,
} from './codec.js';

const proto = loadGatehouseProto();
const deserialize = proto.Client.service.StreamSnapshots.responseDeserialize;
/** Through the bytes a data plane receives: SnapshotDelta in a SnapshotPush, decoded as the client decodes it (proto/src/grpc.ts). */
const overTheWire = (delta: DeltaMessage): DeltaMessage =>
  (deserialize(proto.wrapPush('n', proto.encodeDelta(delta), 'delta')) as { delta: DeltaMessage }).delta;

const API_NAMES = ['a', 'b', 'c', 'd', 'e'];
const SERVER_NAMES = ['s1', 's2'];
// Few paths and hosts, so that names and routes collide and some definitions are rejected.
const PATHS = ['/x/*', '/y/*', '/z/{id}', '/auth-s1/token', undefined];

const apiArb = fc
  .record({
    name: fc.constantFrom(...API_NAMES),
    active: fc.boolean(),
    path: fc.constantFrom(...PATHS),
    hosts: fc.subarray(['h.test', '*.w.test']),
    methods: fc.constantFrom(['ALL'], ['GET'], ['GET', 'POST']),
    // Equal conditions written in two cases (one route key), and others on the same path (other keys).
    headers: fc.constantFrom(undefined, undefined, { 'X-C': ['1'] }, { 'x-c': ['1'] }, { 'x-c': ['2', '1'] }),
    weight: fc.integer({ min: 1, max: 3 }),
    // Every balancing, hash with each source of its key.
    balancing: fc.constantFrom<object>(
      { balancing: 'weight' },
      { balancing: 'least_conn' },
      { balancing: 'hash', hash_on: { source: 'ip' } },
      { balancing: 'hash', hash_on: { source: 'ip', trust_forward_headers: true } },
      { balancing: 'hash', hash_on: { source: 'header', name: 'X-User' } },
      { balancing: 'hash', hash_on: { source: 'cookie', name: 'session' } },
    ),
    server: fc.option(fc.constantFrom(...SERVER_NAMES), { nil: undefined }),
    // scopes and claims_to_headers need a jwt (or introspection) server: with a storage one the API is refused.
    tokenChecks: fc.constantFrom<object>({}, {}, { scopes: ['orders:read'] }, { claims_to_headers: { sub: 'X-User-Id' } }),
    strip: fc.boolean(),
    // plugins whose wire messages have `optional` members
    answer: fc.constantFrom(
      undefined,
      { name: 'request_termination', config: { message: '' } },
      { name: 'request_termination', config: { status_code: 200, body: '', content_type: 'text/plain' } },
      { name: 'request_termination', config: { status_code: 204 } },
      { name: 'redirect', config: { scheme: 'https' } },
      { name: 'redirect', config: { host: 'n.test', port: 8443, path: '/v2', strip_path: true } },
      { name: 'openid_connect', config: { issuer: 'https://idp.test', client_id: 'app', client_secret: 's', cookie_secret: 'k'.repeat(32) } },
      {
        name: 'openid_connect',
        config: {
          issuer: 'http://idp.test',
          allow_http: true,
          client_id: 'app',
          client_secret: 's',
          cookie_secret: 'k'.repeat(32),
          scopes: ['email'],
          claims_to_headers: { email: 'X-Email' },
        },
      },
    ),
    // acl alone is refused (no consumer to authorize); with key_auth it is accepted.
    // request_mirror: a percentage of 0 is proto3's default and must come back as 0, a fraction as itself.
    mirror: fc.constantFrom(
      [],
      [{ name: 'request_mirror', config: { target: 'http://m.test:8080', percentage: 0 } }],
      [{ name: 'request_mirror', config: { target: 'http://m.test', percentage: 12.5 } }],
    ),
    acl: fc.constantFrom([], [{ name: 'acl', config: { allow: ['admins'] } }], [{ name: 'key_auth' }, { name: 'acl', config: { deny: ['banned'] } }]),
    // request_validator: its schema travels as JSON text; the same keys in another order are another schema text.
    validator: fc.constantFrom(
      [],
      [{ name: 'request_validator', config: { body_schema: { type: 'object', properties: { a: { type: 'integer' } }, required: ['a'] } } }],
      [
        {
          name: 'request_validator',
          config: { body_schema: { required: ['a'], type: 'object', properties: { a: { type: 'integer' } } }, body_required: true },
        },
      ],
    ),
  })
  .map((r) =>
    parseApiDefinition({
      name: r.name,
      active: r.active,
      hosts: r.hosts,
      proxy: {
        ...(r.path ? { listen_path: r.path } : {}),
        methods: r.methods,
        match_headers: r.headers,
        strip_path: r.strip,
        upstreams: { ...r.balancing, targets: [{ target: 'http://up.test', weight: r.weight }] },
      },
      plugins: [
        ...(r.server ? [{ name: 'oauth2', config: { server_name: r.server, ...r.tokenChecks } }] : []),
        ...(r.answer ? [r.answer] : []),
        ...r.acl,
        ...r.mirror,
        ...r.validator,
      ],
    }),
  );

// A storage server (refused under an API with scopes or claims_to_headers), a jwt one with inline keys (issuer and
// audiences travel), or a jwt one whose JWKS source (uri, algs) a change may alter.
const strategyArb = fc.oneof(
  fc.constantFrom<object>(
    { name: 'storage', settings: {} },
    { name: 'jwt', settings: [{ alg: 'HS256', key: 'k' }] },
    { name: 'jwt', settings: [{ alg: 'HS256', key: 'k' }], issuer: 'https://idp.test', audiences: ['orders'] },
  ),
  fc
    .record({ uri: fc.constantFrom('https://idp.test/jwks', 'https://idp.test/jwks?v=2'), algs: fc.constantFrom(undefined, ['RS256'], ['ES256', 'RS256']) })
    .map((j) => ({ name: 'jwt', settings: { jwks_uri: j.uri, ...(j.algs && { algs: j.algs }) } })),
);
const serverArb = fc
  .record({ name: fc.constantFrom(...SERVER_NAMES), shared: fc.boolean(), leeway: fc.integer({ min: 0, max: 2 }), strategy: strategyArb })
  .map((r) =>
    parseOAuthServer({
      name: r.name,
      oauth_endpoints: {
        token: { listen_path: r.shared ? '/auth-s1/token' : `/auth-${r.name}/token`, upstreams: { targets: [{ target: 'http://auth.test' }] } },
      },
      token_strategy: { ...r.strategy, leeway: r.leeway },
    }),
  );

const HASH = `scrypt$16384$8$1$${Buffer.alloc(16, 1).toString('base64url')}$${Buffer.alloc(32, 2).toString('base64url')}`;
// Groups or none: a change of groups alone is a change of the credential (and of the DP's group maps).
const groupsArb = fc.constantFrom(undefined, ['admins'], ['Partners', 'admins']);
const userArb = fc
  .record({ username: fc.constantFrom('u1', 'u2'), groups: groupsArb })
  .map(({ username, groups }) => parseBasicAuthCredential({ username, password_hash: HASH, ...(groups && { groups }) }));
// Three credentials over two keys: they collide often (API_KEY_TAKEN).
const keyArb = fc
  .record({ username: fc.constantFrom('k1', 'k2', 'k3'), key: fc.constantFrom('key-a-0123456789', 'key-b-0123456789'), groups: groupsArb })
  .map(({ username, key, groups }) => parseKeyAuthCredential({ username, key_hash: legacyHashApiKey(key), ...(groups && { groups }) }));

type Op =
  | { op: 'upsert-api'; value: ReturnType<typeof parseApiDefinition> }
  | { op: 'delete-api'; name: string }
  | { op: 'upsert-server'; value: ReturnType<typeof parseOAuthServer> }
  | { op: 'delete-server'; name: string }
  | { op: 'upsert-user'; value: ReturnType<typeof parseBasicAuthCredential> }
  | { op: 'delete-user'; name: string }
  | { op: 'upsert-key'; value: ReturnType<typeof parseKeyAuthCredential> }
  | { op: 'delete-key'; name: string };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: apiArb.map((value) => ({ op: 'upsert-api' as const, value })) },
  { weight: 2, arbitrary: fc.constantFrom(...API_NAMES).map((name) => ({ op: 'delete-api' as const, name })) },
  { weight: 2, arbitrary: serverArb.map((value) => ({ op: 'upsert-server' as const, value })) },
  { weight: 1, arbitrary: fc.constantFrom(...SERVER_NAMES).map((name) => ({ op: 'delete-server' as const, name })) },
  { weight: 1, arbitrary: userArb.map((value) => ({ op: 'upsert-user' as const, value })) },
  { weight: 1, arbitrary: fc.constantFrom('u1', 'u2').map((name) => ({ op: 'delete-user' as const, name })) },
  { weight: 1, arbitrary: keyArb.map((value) => ({ op: 'upsert-key' as const, value })) },
  { weight: 1, arbitrary: fc.constantFrom('k1', 'k2', 'k3').map((name) => ({ op: 'delete-key' as const, name })) },
);

/** As the store does: a new list with the changed item replaced in place (or appended), others kept as they are. */
function upsert<T>(list: readonly T[], value: T, nameOf: (t: T) => string): T[] {
  const i = list.findIndex((t) => nameOf(t) === nameOf(value));
  return i < 0 ? [...list, value] : list.map((t, j) => (j === i ? value : t));
}

function step(defs: Definitions, op: Op): Definitions {
  const users = defs.basicAuthCredentials ?? [];
  const keys = defs.keyAuthCredentials ?? [];
  switch (op.op) {
    case 'upsert-api':
      return { ...defs, apis: upsert(defs.apis, op.value, (a) => a.name) };
    case 'delete-api':
      return { ...defs, apis: defs.apis.filter((a) => a.name !== op.name) };
    case 'upsert-server':
      return { ...defs, oauthServers: upsert(defs.oauthServers, op.value, (s) => s.name) };
    case 'delete-server':
      return { ...defs, oauthServers: defs.oauthServers.filter((s) => s.name !== op.name) };
    case 'upsert-user':
      return { ...defs, basicAuthCredentials: upsert(users, op.value, (u) => u.username) };
    case 'delete-user':
      return { ...defs, basicAuthCredentials: users.filter((u) => u.username !== op.name) };
    case 'upsert-key':
      return { ...defs, keyAuthCredentials: upsert(keys, op.value, (k) => k.username) };
    case 'delete-key':
      return { ...defs, keyAuthCredentials: keys.filter((k) => k.username !== op.name) };
  }
}

/** The edit `op` makes to `defs`, as the admin API tells the codec (deriveDefinitions). */
function editOf(defs: Definitions, op: Op): DefinitionEdit {
  const kind = changeOf(op).kind as DefinitionEdit['kind'];
  const lists = {
    api: defs.apis,
    'oauth-server': defs.oauthServers,
    'basic-auth-credential': defs.basicAuthCredentials,
    'key-auth-credential': defs.keyAuthCredentials,
  };
  const list: readonly object[] = lists[kind] ?? [];
  const nameOf = (d: object) => (d as { name?: string }).name ?? (d as { username: string }).username;
  const after = 'value' in op ? op.value : undefined;
  const name = after ? nameOf(after) : (op as { name: string }).name;
  return { kind, before: list.find((d) => nameOf(d) === name), after };
}

/** What a compile decides, without the functions and regexes inside routes. */
function verdicts(compiled: CompiledConfig) {
  return {
    routes: compiled.routes.map((r) => [r.id, routeConflictKey(r), r.targets.map((t) => [t.template, t.weight]), r.plugins.map((p) => p.name)]).sort(),
    inactive: compiled.inactiveRoutes.map((r) => r.id).sort(),
    servers: [...compiled.oauthServers.keys()].sort(),
    users: [...compiled.basicAuthUsers.keys()].sort(),
    keys: [...compiled.apiKeys].sort(),
    groups: [[...compiled.basicAuthGroups].sort(), [...compiled.keyAuthGroups].sort()],
    rejected: compiled.rejected.map((r) => [r.kind, r.name, r.error.code, r.error.message]).sort(),
  };
}

/** Fresh objects for everything, in the same order (equal ranks keep list order), nothing memoised on them. */
const fresh = (defs: Definitions): Definitions => ({
  apis: defs.apis.map((a) => parseApiDefinition(structuredClone(a))),
  oauthServers: defs.oauthServers.map((s) => parseOAuthServer(structuredClone(s))),
  basicAuthCredentials: (defs.basicAuthCredentials ?? []).map((u) => parseBasicAuthCredential(structuredClone(u))),
  keyAuthCredentials: (defs.keyAuthCredentials ?? []).map((k) => parseKeyAuthCredential(structuredClone(k))),
});

test('delta on the wire and cached compile agree with a full rebuild over random upserts and deletes', () => {
  fc.assert(
    fc.property(fc.array(opArb, { minLength: 1, maxLength: 25 }), (ops) => {
      const cpCache = createCompileCache();
      const dpCache = createCompileCache();
      let cp: SnapshotContent = { version: 1, hash: definitionsHash({ apis: [], oauthServers: [] }), defs: { apis: [], oauthServers: [] } };
      let dp: SnapshotContent = fromSnapshotMessage(structuredClone(toSnapshotMessage(1, cp.defs)));
      for (const [i, op] of ops.entries()) {
        const defs = step(cp.defs, op);
        // Every other write as the admin API makes it: its hash and delta derived from the previous
        // version's (O(changes)); the others hashed and diffed whole. Both are checked against a hash
        // of fresh objects computed from nothing below.
        if (i % 2 === 0) deriveDefinitions(cp.defs, defs, [editOf(cp.defs, op)]);
        const next = { version: cp.version + 1, hash: definitionsHash(defs), defs };
        dp = applyDeltaMessage(dp, overTheWire(toDeltaMessage(cp, next)));
        cp = next;
        const full = fresh(cp.defs);
        expect(dp.hash).toBe(cp.hash);
        expect(definitionsHash(full)).toBe(cp.hash);
        expect(dp.version).toBe(cp.version);
        const expected = verdicts(compileDefinitions(full));
        expect(verdicts(compileDefinitions(cp.defs, { cache: cpCache }))).toEqual(expected);
        // The DP's lists are in the order its deltas leave them, the store's in write order: who wins a conflict depends
        // on list order, so the DP is compared with a full compile of its own order; a whole
        // configuration (what the CP ever sends) compiles the same in any order.
        const dpVerdicts = verdicts(compileDefinitions(dp.defs, { cache: dpCache }));
        expect(dpVerdicts).toEqual(verdicts(compileDefinitions(fresh(dp.defs))));
        if (expected.rejected.length === 0) expect(dpVerdicts).toEqual(expected);
      }
    }),
    { numRuns: 150 },
  );
});

test('a long chain of deltas leaves every version whole: lists made only when read, patches folded on the way', () => {
  const api = (i: number, v: number) =>
    parseApiDefinition({ name: `api-${i}`, proxy: { listen_path: `/api-${i}/v${v}/*`, upstreams: { targets: [{ target: 'http://up.test' }] } } });
  const editArb = fc.record({ i: fc.nat(399), v: fc.nat(3), remove: fc.boolean() });
  fc.assert(
    fc.property(fc.array(editArb, { minLength: 300, maxLength: 400 }), (edits) => {
      const first: Definitions = { apis: Array.from({ length: 300 }, (_, i) => api(i, 0)), oauthServers: [] };
      let cp: SnapshotContent = { version: 1, hash: definitionsHash(first), defs: first };
      let dp: SnapshotContent = fromSnapshotMessage(structuredClone(toSnapshotMessage(1, first)));
      const kept: Array<[SnapshotContent, SnapshotContent]> = [];
      for (const [n, { i, v, remove }] of edits.entries()) {
        const apis = remove ? cp.defs.apis.filter((a) => a.name !== `api-${i}`) : upsert(cp.defs.apis, api(i, v), (a) => a.name);
        const next = { version: cp.version + 1, hash: definitionsHash({ ...cp.defs, apis }), defs: { ...cp.defs, apis } };
        dp = applyDeltaMessage(dp, overTheWire(toDeltaMessage(cp, next)));
        cp = next;
        // Some versions are read while the chain goes on (the snapshot cache's save), the others only at the end.
        if (n % 50 === 0) expect(dp.defs.apis).toHaveLength(cp.defs.apis.length);
        if (n % 37 === 0) kept.push([cp, dp]);
      }
      kept.push([cp, dp]);
      const contents = (defs: Definitions) => defs.apis.map((a) => JSON.stringify(a)).sort();
      for (const [want, got] of kept) expect(contents(got.defs)).toEqual(contents(want.defs));
      // Made once: every read is the same array (lists are keys of memos, e.g. the admin API's sorted pages).
      expect(dp.defs.apis).toBe(dp.defs.apis);
    }),
    { numRuns: 5 },
  );
});

test('a data plane holding only the newest version keeps none of the earlier ones alive', async () => {
  const api = (i: number, v: number) =>
    parseApiDefinition({ name: `api-${i}`, proxy: { listen_path: `/api-${i}/v${v}/*`, upstreams: { targets: [{ target: 'http://up.test' }] } } });
  let cp: SnapshotContent = (() => {
    const defs = { apis: Array.from({ length: 100 }, (_, i) => api(i, 0)), oauthServers: [] };
    return { version: 1, hash: definitionsHash(defs), defs };
  })();
  let dp: SnapshotContent = fromSnapshotMessage(structuredClone(toSnapshotMessage(1, cp.defs)));
  prepareForDeltas(dp.defs);
  const versions = [new WeakRef(dp.defs)];
  for (let v = 1; v <= 5; v++) {
    const apis = v % 2 ? upsert(cp.defs.apis, api(v, v), (a) => a.name) : cp.defs.apis.filter((a) => a.name !== `api-${v}`);
    const next = { version: cp.version + 1, hash: definitionsHash({ ...cp.defs, apis }), defs: { ...cp.defs, apis } };
    dp = applyDeltaMessage(dp, overTheWire(toDeltaMessage(cp, next)));
    cp = next;
    versions.push(new WeakRef(dp.defs));
  }
  await collectGarbage();
  expect(versions.map((v) => v.deref() !== undefined)).toEqual([false, false, false, false, false, true]);
  expect(dp.defs.apis.map((a) => a.name).sort()).toEqual(cp.defs.apis.map((a) => a.name).sort());
});

test('a data plane that keeps no definition hashes (keepDefinitionHashes(false)) derives the hashes the control plane computes', () => {
  fc.assert(
    fc.property(fc.array(opArb, { minLength: 1, maxLength: 25 }), (ops) => {
      let cp: SnapshotContent = { version: 1, hash: definitionsHash({ apis: [], oauthServers: [] }), defs: { apis: [], oauthServers: [] } };
      let dp: SnapshotContent = fromSnapshotMessage(structuredClone(toSnapshotMessage(1, cp.defs)));
      for (const op of ops) {
        const defs = step(cp.defs, op);
        const next = { version: cp.version + 1, hash: definitionsHash(defs), defs };
        const delta = overTheWire(toDeltaMessage(cp, next));
        // The DP's side only: its definitions are its own objects, so every hash it sums is computed afresh.
        keepDefinitionHashes(false);
        try {
          dp = applyDeltaMessage(dp, delta);
        } finally {
          keepDefinitionHashes(true);
        }
        cp = next;
        expect(dp.hash).toBe(cp.hash);
      }
    }),
    { numRuns: 100 },
  );
});

function changeOf(op: Op): DefinitionChange {
  const [verb, noun] = op.op.split('-') as ['upsert' | 'delete', string];
  const kind = ({ api: 'api', server: 'oauth-server', user: 'basic-auth-credential', key: 'key-auth-credential' } as Record<string, DefinitionKindName>)[noun];
  if (verb === 'delete') return { kind, name: (op as { name: string }).name };
  const def = (op as { value: { name?: string; username?: string } }).value;
  return { kind, name: def.name ?? def.username!, def };
}

/** Everything an index holds, as plain data: what a rejected change must leave as it was. */
const contentsOf = (index: ConfigIndex) => ({
  entries: [...index.entries].map(([key, e]) => [key, e.def, e.built.keys, e.refs]).sort(),
  routeOwners: [...index.routeOwners].sort(),
  serverRefs: [...index.serverRefs].sort(),
  size: [index.entries.size, index.routeOwners.size, index.serverRefs.size],
});

test('the indexed check of a change agrees with compiling the whole: same verdict, same error, same routes', () => {
  const seen = { accepted: 0, rejected: 0, ownErrors: 0 };
  fc.assert(
    // keepRoutes false: the control plane's cache, which compiles an API's route again when it is read.
    fc.property(fc.array(opArb, { minLength: 1, maxLength: 30 }), fc.boolean(), (ops, keepRoutes) => {
      const cache = createCompileCache({ keepRoutes });
      let defs: Definitions = { apis: [], oauthServers: [] };
      let index = indexConfig(defs, cache);
      for (const op of ops) {
        const change = changeOf(op);
        const next = step(defs, op);
        // What the admin API does: the written definition ranked last, its own rejection is the answer.
        const own = (k: DefinitionKindName, n: string) => k === change.kind && n === change.name;
        const full = compileDefinitions(next, { rank: (k, n) => (own(k, n) ? 1 : 0) });
        let outcome: { ok: true; index: ReturnType<typeof applyChanges> } | { ok: false; error: unknown };
        const held = contentsOf(index);
        try {
          outcome = { ok: true, index: applyChanges(index, [change], cache) };
        } catch (error) {
          outcome = { ok: false, error };
        }
        expect(outcome.ok).toBe(full.rejected.length === 0);
        // Accepted or not, the index given is as it was: a NACKed delta keeps the old one serving and
        // checking the next delta against it.
        expect(contentsOf(index)).toEqual(held);
        if (!outcome.ok) {
          seen.rejected++;
          const ownRejection = full.rejected.find((r) => own(r.kind, r.name));
          const error = (outcome.error as { error: { code: string; message: string } }).error;
          if (ownRejection) {
            seen.ownErrors++;
            expect([error.code, error.message]).toEqual([ownRejection.error.code, ownRejection.error.message]);
          }
          continue;
        }
        seen.accepted++;
        defs = next;
        index = outcome.index;
        const routes = indexRoutes(index);
        expect(routes.routes.map((r) => [r.id, routeConflictKey(r)]).sort()).toEqual(full.routes.map((r) => [r.id, routeConflictKey(r)]).sort());
        expect([...routes.oauthServers.keys()].sort()).toEqual([...full.oauthServers.keys()].sort());
        expect([...routes.basicAuthUsers.keys()].sort()).toEqual([...full.basicAuthUsers.keys()].sort());
        expect([...routes.apiKeys].sort()).toEqual([...full.apiKeys].sort());
        expect([[...routes.basicAuthGroups].sort(), [...routes.keyAuthGroups].sort()]).toEqual([
          [...full.basicAuthGroups].sort(),
          [...full.keyAuthGroups].sort(),
        ]);
      }
    }),
    { numRuns: 200 },
  );
  // The generators do produce both outcomes (paths and servers collide often).
  expect(seen.accepted).toBeGreaterThan(100);
  expect(seen.ownErrors).toBeGreaterThan(100);
});

describe('a delta is applied only where it belongs', () => {
  const api = (name: string, path: string) =>
    parseApiDefinition({ name, proxy: { listen_path: path, upstreams: { targets: [{ target: 'http://up.test' }] } } });
  const v1: SnapshotContent = (() => {
    const defs = { apis: [api('a', '/a/*'), api('b', '/b/*')], oauthServers: [] };
    return { version: 1, hash: definitionsHash(defs), defs };
  })();
  const v2defs = { apis: [api('a', '/a2/*'), v1.defs.apis[1]], oauthServers: [] };
  const v2: SnapshotContent = { version: 2, hash: definitionsHash(v2defs), defs: v2defs };

  test('it carries only what changed, and unchanged definitions keep their objects', () => {
    const delta = toDeltaMessage(v1, v2);
    expect(delta).toMatchObject({ base_version: 1, base_hash: v1.hash, version: 2, hash: v2.hash, removed_apis: [] });
    expect((delta.apis as { name: string }[]).map((a) => a.name)).toEqual(['a']);
    const applied = applyDeltaMessage(v1, overTheWire(delta));
    expect(applied.defs.apis.find((a) => a.name === 'b')).toBe(v1.defs.apis[1]);
  });

  test.each([
    ['another version as base', { ...v1, version: 5 }, /delta base is version 1/],
    ['other content under the same version', { ...v1, hash: 'f'.repeat(64) }, /delta base is version 1/],
  ])('refused on %s', (_name, base, message) => {
    expect(() => applyDeltaMessage(base, toDeltaMessage(v1, v2))).toThrow(message);
  });

  test('refused when the result does not hash to what the delta says', () => {
    expect(() => applyDeltaMessage(v1, { ...toDeltaMessage(v1, v2), hash: '0'.repeat(64) })).toThrow(/hash mismatch after delta 1 → 2/);
  });

  test('refused when an upsert is not a valid definition', () => {
    const delta = toDeltaMessage(v1, v2);
    expect(() => applyDeltaMessage(v1, { ...delta, apis: [{ name: 'a', proxy: { listen_path: 'no-slash' } }] })).toThrow(/snapshot apis\[0\]/);
  });
});
