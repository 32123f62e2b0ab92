import protobuf from 'protobufjs';
import { loadGatehouseProto, PROTO_PATH } from '../grpc.js';
import { GatehouseError } from '../errors.js';
import { parseApiDefinition, parseBasicAuthCredential, parseKeyAuthCredential, parseOAuthServer } from '../definition/index.js';
import type { ApiDefinition, Definitions } from '../definition/types.js';
import { hash as sha256 } from 'node:crypto';
import { legacyHashApiKey } from '../api-key.js';
import {
  apiMessage,
  applyDeltaMessage,
  contentHash,
  snapshotContent,
  definitionsHash,
  fromSnapshotMessage,
  oauthServerMessage,
  toDeltaMessage,
  toSnapshotMessage,
} from './codec.js';
import type { OAuthServerMessage, SnapshotMessage } from './codec.js';

const target = (t: string) => ({ upstreams: { targets: [{ target: t }] } });

const DEFS: Definitions = {
  apis: [
    parseApiDefinition({
      name: 'zeta',
      proxy: { listen_path: '/zeta/*', ...target('http://z:1') },
      // Every plugin's config travels as its own typed message (gatehouse.proto `Plugin.config`).
      plugins: [
        { name: 'cors', config: { domains: ['https://a.com', '*.b.com'], exposed_headers: ['X-E'], allow_credentials: true, max_age: 60 } },
        {
          name: 'request_transformer',
          config: { add: { headers: { 'X-A': '1' }, querystring: { q: 'v' } }, remove: { headers: ['X-R'], querystring: ['z'] } },
        },
        { name: 'response_transformer', enabled: false, config: { append: { headers: { 'X-B': '2' } } } },
        { name: 'body_limit', config: { limit: '512K' } },
        { name: 'rate_limit', config: { limit: '100-m', policy: 'redis', trust_forward_headers: true, key: 'token' } },
      ],
    }),
    parseApiDefinition({
      name: 'alpha',
      active: false,
      hosts: ['a.example.com', '*.example.org'],
      proxy: {
        listen_path: '/prepath/{service}/*',
        methods: ['GET', 'post'],
        strip_path: true,
        append_path: true,
        preserve_host: true,
        insecure_skip_verify: true,
        forwarding_timeouts: { dial_timeout: '250ms', response_header_timeout: '1m30s' },
        upstreams: {
          balancing: 'weight',
          targets: [
            { target: 'http://{service}.com', weight: 3 },
            { target: 'https://b.example.com/x', weight: 1000 },
          ],
        },
      },
      plugins: [{ name: 'oauth2', enabled: false, config: { server_name: 'jwt-server' } }],
    }),
    parseApiDefinition({ name: 'hosts-only', hosts: ['only.example.com'], proxy: target('http://h:1') }),
    parseApiDefinition({ name: 'methods-only', proxy: { methods: ['DELETE'], ...target('http://m:1') } }),
  ],
  oauthServers: [
    parseOAuthServer({
      name: 'jwt-server',
      oauth_endpoints: {
        token: { listen_path: '/auth/token', strip_path: true, ...target('http://auth/token') },
        revoke: { listen_path: '/auth/revoke', methods: ['POST'], ...target('http://auth/revoke') },
      },
      token_strategy: { name: 'jwt', leeway: 30, settings: [{ alg: 'HS256', key: 'new' }, { secret: 'old' }] },
    }),
    parseOAuthServer({
      name: 'storage-ttl',
      oauth_endpoints: { token: { listen_path: '/s/token', ...target('http://s') } },
      token_strategy: { name: 'storage', settings: { default_ttl: 600 } },
    }),
    parseOAuthServer({
      name: 'storage-plain',
      oauth_endpoints: { token: { listen_path: '/p/token', ...target('http://p') } },
      token_strategy: { name: 'storage', settings: [] },
    }),
  ],
};

const proto = loadGatehouseProto();
const lazyProto = loadGatehouseProto({ lazyDefinitions: true });
// Decoding as data planes do: keepCase field names, LOADER_OPTIONS of grpc.ts.
const KEEP_CASE_ROOT = new protobuf.Root().loadSync(PROTO_PATH, { keepCase: true });
const SnapshotType = KEEP_CASE_ROOT.lookupType('gatehouse.v1.Snapshot');
const TO_OBJECT = { longs: Number, enums: String, defaults: true, arrays: true, oneofs: true };

const decoders: [string, (bytes: Buffer) => unknown][] = [
  ['protobufjs decode + toObject', (bytes) => SnapshotType.toObject(SnapshotType.decode(bytes), TO_OBJECT)],
  [
    'grpc-js client deserializer of SnapshotPush',
    (bytes) => (proto.Client.service.StreamSnapshots.responseDeserialize(proto.wrapPush('n1', bytes)) as { snapshot: unknown }).snapshot,
  ],
  [
    "a data plane's deserializer (lazyDefinitions: each definition decoded as it is parsed)",
    (bytes) => (lazyProto.Client.service.StreamSnapshots.responseDeserialize(proto.wrapPush('n1', bytes)) as { snapshot: unknown }).snapshot,
  ],
];

function sortedByName(defs: Definitions): Definitions {
  const byName = (a: { name: string }, b: { name: string }) => (a.name < b.name ? -1 : 1);
  return { apis: [...defs.apis].sort(byName), oauthServers: [...defs.oauthServers].sort(byName) };
}

test.each(decoders)('round trip through encodeSnapshot and %s', (_name, decode) => {
  const msg = toSnapshotMessage(42, DEFS);
  const decoded = decode(proto.encodeSnapshot(msg)) as SnapshotMessage;
  const back = fromSnapshotMessage(decoded);
  expect(back.version).toBe(42);
  expect(back.hash).toBe(definitionsHash(DEFS));
  expect(back.defs).toEqual(sortedByName(DEFS));
});

test('round trip of the plain message (no wire)', () => {
  const back = fromSnapshotMessage(structuredClone(toSnapshotMessage(7, DEFS)));
  expect(back).toEqual({ version: 7, hash: definitionsHash(DEFS), defs: sortedByName(DEFS) });
});

test('wire conventions are undone only where they apply: weight 0 reads as unset (the default, 1), "" listen_path as absent', () => {
  const msg = structuredClone(toSnapshotMessage(3, DEFS));
  const apis = msg.apis as { name: string; proxy: { upstreams: { targets: { weight: number }[] } } }[];
  const zeta = apis.find((a) => a.name === 'zeta')!;
  expect(zeta.proxy.upstreams.targets[0].weight).toBe(1);
  zeta.proxy.upstreams.targets[0].weight = 0;
  const back = fromSnapshotMessage(msg);
  // Same content (the hash is checked against it): weight 1 again, and the hosts-only API without a listen_path.
  expect(back.hash).toBe(definitionsHash(DEFS));
  expect(back.defs.apis.find((a) => a.name === 'zeta')!.proxy.upstreams.targets[0].weight).toBe(1);
  expect(back.defs.apis.find((a) => a.name === 'hosts-only')!.proxy.listen_path).toBeUndefined();
  // The message itself is left as it was.
  expect(zeta.proxy.upstreams.targets[0].weight).toBe(0);
});

test('message carries sorted definitions and the content hash', () => {
  const msg = toSnapshotMessage(1, DEFS);
  expect(msg.hash).toMatch(/^[0-9a-f]{64}$/);
  expect(msg.hash).toBe(definitionsHash(DEFS));
  expect((msg.apis as { name: string }[]).map((a) => a.name)).toEqual(['alpha', 'hosts-only', 'methods-only', 'zeta']);
  const hostsOnly = (msg.apis as { name: string; proxy: { listen_path: string } }[])[1];
  expect(hostsOnly.proxy.listen_path).toBe('');
});

describe('token checks: issuer and audiences, scopes and claims_to_headers', () => {
  const CHECKED: Definitions = {
    apis: [
      parseApiDefinition({
        name: 'orders',
        proxy: { listen_path: '/orders/*', ...target('http://o:1') },
        plugins: [
          {
            name: 'oauth2',
            config: { server_name: 'idp', scopes: ['orders:read', 'orders:write'], claims_to_headers: { sub: 'X-User-Id', email: 'X-User-Email' } },
          },
        ],
      }),
    ],
    oauthServers: [
      parseOAuthServer({
        name: 'idp',
        oauth_endpoints: { token: { listen_path: '/idp/token', ...target('http://idp') } },
        token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: 'k' }], issuer: 'https://idp.test/', audiences: ['orders', 'billing'] },
      }),
      parseOAuthServer({
        name: 'intro',
        oauth_endpoints: {
          token: { listen_path: '/i/token', ...target('http://i') },
          introspect: { listen_path: '/i/introspect', ...target('http://i/introspect') },
        },
        token_strategy: { name: 'introspection', issuer: 'https://i.test' },
      }),
    ],
  };

  test.each(decoders)('round trip through encodeSnapshot and %s', (_name, decode) => {
    const back = fromSnapshotMessage(decode(proto.encodeSnapshot(toSnapshotMessage(5, CHECKED))) as SnapshotMessage);
    expect(back.hash).toBe(definitionsHash(CHECKED));
    expect(back.defs).toEqual(sortedByName(CHECKED));
    expect(back.defs.oauthServers.find((s) => s.name === 'intro')!.token_strategy).not.toHaveProperty('audiences');
  });

  test('without them, a server and an oauth2 config have no such members in their messages (so they keep their hashes: PINNED_DEFS_HASH)', () => {
    const msg = toSnapshotMessage(1, DEFS);
    const server = (msg.oauth_servers as { name: string; token_strategy: object }[]).find((s) => s.name === 'jwt-server')!;
    expect(Object.keys(server.token_strategy).sort()).toEqual(['default_ttl', 'keys', 'leeway', 'name']);
    const alphaMessage = (msg.apis as { name: string; plugins: { oauth2: object }[] }[]).find((a) => a.name === 'alpha')!;
    expect(alphaMessage.plugins[0].oauth2).toEqual({ server_name: 'jwt-server' });
  });
});

test('empty definitions encode and decode', () => {
  const empty = { apis: [], oauthServers: [] };
  const msg = toSnapshotMessage(0, empty);
  const decoded = SnapshotType.toObject(SnapshotType.decode(proto.encodeSnapshot(msg)), TO_OBJECT) as SnapshotMessage;
  expect(fromSnapshotMessage(decoded)).toEqual({ version: 0, hash: msg.hash, defs: empty });
});

test.each([
  ['apis reversed', { apis: [...DEFS.apis].reverse(), oauthServers: DEFS.oauthServers }],
  ['servers reversed', { apis: DEFS.apis, oauthServers: [...DEFS.oauthServers].reverse() }],
  [
    'keys inserted in another order',
    JSON.parse(JSON.stringify(DEFS, (_k, v) => (v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v))),
  ],
])('hash is stable: %s', (_name, defs) => {
  expect(definitionsHash(defs)).toBe(definitionsHash(DEFS));
});

const alpha = DEFS.apis[1];
const changed = (api: Partial<ApiDefinition>): Definitions => ({
  apis: [{ ...alpha, ...api }, ...DEFS.apis.filter((a) => a !== alpha)],
  oauthServers: DEFS.oauthServers,
});

test.each([
  ['active flipped', changed({ active: true })],
  ['host added', changed({ hosts: [...alpha.hosts, 'c.com'] })],
  ['target weight', changed({ proxy: { ...alpha.proxy, upstreams: { balancing: 'weight', targets: [{ target: 'http://{service}.com', weight: 4 }] } } })],
  ['timeout', changed({ proxy: { ...alpha.proxy, forwarding_timeouts: { dial_timeout: '1s', response_header_timeout: '1m30s' } } })],
  ['plugin enabled', changed({ plugins: [{ name: 'oauth2', enabled: true, config: { server_name: 'jwt-server' } }] })],
  ['plugin scopes', changed({ plugins: [{ name: 'oauth2', enabled: false, config: { server_name: 'jwt-server', scopes: ['orders:read'] } }] })],
  [
    'server audiences',
    {
      apis: DEFS.apis,
      oauthServers: [
        {
          ...DEFS.oauthServers[0],
          token_strategy: {
            name: 'jwt' as const,
            settings: [
              { alg: 'HS256' as const, key: 'new' },
              { alg: 'HS256' as const, key: 'old' },
            ],
            leeway: 30,
            audiences: ['orders'],
          },
        },
        ...DEFS.oauthServers.slice(1),
      ],
    },
  ],
  ['api removed', { apis: DEFS.apis.slice(1), oauthServers: DEFS.oauthServers }],
  [
    'server leeway',
    {
      apis: DEFS.apis,
      oauthServers: [
        { ...DEFS.oauthServers[0], token_strategy: { name: 'jwt' as const, settings: [{ alg: 'HS256' as const, key: 'new' }], leeway: 30 } },
        ...DEFS.oauthServers.slice(1),
      ],
    },
  ],
])('hash changes when content changes: %s', (_name, defs) => {
  expect(definitionsHash(defs)).not.toBe(definitionsHash(DEFS));
});

function mutated(mutate: (msg: any) => void): SnapshotMessage {
  const msg = structuredClone(toSnapshotMessage(3, DEFS));
  mutate(msg);
  return msg;
}

test.each([
  ['hash does not match content', mutated((m) => (m.hash = 'f'.repeat(64))), 'snapshot hash mismatch'],
  ['content changed under the hash', mutated((m) => (m.apis[0].active = true)), 'snapshot hash mismatch'],
  ['api without name', mutated((m) => (m.apis[0].name = '')), 'snapshot apis[0]: name is required'],
  ['api without targets', mutated((m) => (m.apis[0].proxy.upstreams.targets = [])), 'snapshot apis[0]: proxy.upstreams.targets must not be empty'],
  ['api without proxy', mutated((m) => (m.apis[1].proxy = null)), 'snapshot apis[1]: proxy is required'],
  ['unknown plugin', mutated((m) => (m.apis[0].plugins[0].name = 'no_such_plugin')), 'snapshot apis[0]: plugins[0].name: unknown plugin "no_such_plugin"'],
  [
    'jwt server without keys',
    mutated((m) => (m.oauth_servers[0].token_strategy.keys = [])),
    'snapshot oauth_servers[0]: token_strategy.settings must not be empty',
  ],
  [
    'endpoint without listen_path',
    mutated((m) => (m.oauth_servers[1].oauth_endpoints.token.listen_path = '')),
    'snapshot oauth_servers[1]: oauth_endpoints.token.listen_path is required',
  ],
  ['duplicate api names', mutated((m) => (m.apis[1] = m.apis[0])), 'snapshot apis[1]: duplicate name "alpha"'],
  ['apis not an array', mutated((m) => (m.apis = null)), 'snapshot apis must be an array'],
])('malformed message is rejected: %s', (_name, msg, message) => {
  let error: unknown;
  try {
    fromSnapshotMessage(msg);
  } catch (err) {
    error = err;
  }
  expect(error).toBeInstanceOf(GatehouseError);
  expect((error as GatehouseError).code).toBe('VALIDATION_FAILED');
  expect((error as GatehouseError).message).toContain(message);
});

function generatedApis(n: number): ApiDefinition[] {
  return Array.from({ length: n }, (_, i) => {
    const id = String(i).padStart(5, '0');
    return {
      name: `api-${id}`,
      active: true,
      hosts: [`svc-${id}.example.com`],
      proxy: {
        listen_path: `/api-${id}/v1/*`,
        upstreams: {
          balancing: 'roundrobin',
          targets: [{ target: `http://backend-${id}.internal:8080/v1`, weight: 1 }],
        },
        methods: ['GET', 'POST'],
        strip_path: true,
        append_path: false,
        preserve_host: false,
        insecure_skip_verify: false,
        forwarding_timeouts: { dial_timeout: '30s', response_header_timeout: '60s' },
      },
      plugins: [{ name: 'oauth2', enabled: true, config: { server_name: 'jwt-server' } }],
    };
  });
}

test('50,000 APIs encode within sane bounds and decode back', () => {
  const started = Date.now();
  const defs: Definitions = { apis: generatedApis(50_000), oauthServers: DEFS.oauthServers };
  const msg = toSnapshotMessage(1, defs);
  const bytes = proto.encodeSnapshot(msg);
  const encodedAt = Date.now();
  const back = fromSnapshotMessage(SnapshotType.toObject(SnapshotType.decode(bytes), TO_OBJECT) as SnapshotMessage);
  console.log(
    `50,000 APIs: ${bytes.length} bytes (${(bytes.length / 2 ** 20).toFixed(1)} MiB); ` +
      `hash+encode ${encodedAt - started} ms, decode+validate ${Date.now() - encodedAt} ms`,
  );
  expect(bytes.length).toBeGreaterThan(4 * 2 ** 20);
  expect(bytes.length).toBeLessThan(64 * 2 ** 20);
  expect(back.defs.apis).toHaveLength(50_000);
  expect(back.defs.apis[49_999]).toEqual(defs.apis[49_999]);
  expect(back.hash).toBe(msg.hash);
});

test('basic_auth users travel sorted by username; none at all leaves the hash as it was', () => {
  const hash = (n: number) => `scrypt$16384$8$1$${Buffer.alloc(16, n).toString('base64url')}$${Buffer.alloc(32, n).toString('base64url')}`;
  const withUsers: Definitions = {
    ...DEFS,
    basicAuthCredentials: [
      { username: 'zed', password_hash: hash(1) },
      { username: 'amy', password_hash: hash(2) },
    ],
  };
  const message = toSnapshotMessage(3, withUsers);
  expect(message.basic_auth_credentials).toEqual([
    { username: 'amy', password_hash: hash(2) },
    { username: 'zed', password_hash: hash(1) },
  ]);
  expect(fromSnapshotMessage(structuredClone(message)).defs.basicAuthCredentials).toEqual(message.basic_auth_credentials);
  expect(definitionsHash({ ...DEFS, basicAuthCredentials: [] })).toBe(definitionsHash(DEFS));
  expect(definitionsHash(withUsers)).not.toBe(definitionsHash(DEFS));
  expect(() => fromSnapshotMessage({ ...message, basic_auth_credentials: [{ username: 'amy', password_hash: 'plain' }] })).toThrow(
    /basic_auth_credentials\[0\]: password_hash/,
  );
});

const KEYS = [
  { username: 'zed', key_hash: legacyHashApiKey('zed-key-0123456789') },
  { username: 'amy', key_hash: legacyHashApiKey('amy-key-0123456789') },
];

test.each(decoders)('key_auth credentials travel sorted by username, as digests, through encodeSnapshot and %s', (_name, decode) => {
  const withKeys: Definitions = { ...DEFS, keyAuthCredentials: KEYS };
  const message = toSnapshotMessage(4, withKeys);
  expect(message.key_auth_credentials).toEqual([KEYS[1], KEYS[0]]);
  const back = fromSnapshotMessage(decode(proto.encodeSnapshot(message)) as SnapshotMessage);
  expect(back.defs.keyAuthCredentials).toEqual([KEYS[1], KEYS[0]]);
  expect(back.hash).toBe(definitionsHash(withKeys));
  expect(definitionsHash(withKeys)).not.toBe(definitionsHash(DEFS));
});

test.each(decoders)(
  'credential groups and the acl plugin travel through encodeSnapshot and %s; a credential without groups has no groups member',
  (_name, decode) => {
    const hash = `scrypt$16384$8$1$${Buffer.alloc(16, 1).toString('base64url')}$${Buffer.alloc(32, 1).toString('base64url')}`;
    const acl = parseApiDefinition({
      name: 'acl',
      proxy: { listen_path: '/acl/*', ...target('http://a:1') },
      plugins: [{ name: 'key_auth' }, { name: 'acl', config: { deny: ['Partners', 'banned'], hide_groups_header: true } }],
    });
    const withGroups: Definitions = {
      ...DEFS,
      apis: [...DEFS.apis, acl],
      basicAuthCredentials: [parseBasicAuthCredential({ username: 'amy', password_hash: hash, groups: ['Ops', 'admins', 'ops'] })],
      keyAuthCredentials: [parseKeyAuthCredential({ ...KEYS[0], groups: ['partners'] }), KEYS[1]],
    };
    const message = toSnapshotMessage(5, withGroups);
    expect(message.basic_auth_credentials).toEqual([{ username: 'amy', password_hash: hash, groups: ['admins', 'ops'] }]);
    expect(message.key_auth_credentials).toEqual([KEYS[1], { ...KEYS[0], groups: ['partners'] }]);
    const back = fromSnapshotMessage(decode(proto.encodeSnapshot(message)) as SnapshotMessage);
    expect(back.hash).toBe(definitionsHash(withGroups));
    expect(back.defs.basicAuthCredentials).toEqual([{ username: 'amy', password_hash: hash, groups: ['admins', 'ops'] }]);
    expect(back.defs.keyAuthCredentials).toEqual([KEYS[1], { ...KEYS[0], groups: ['partners'] }]);
    expect(back.defs.keyAuthCredentials![0]).not.toHaveProperty('groups');
    expect(back.defs.apis.find((a) => a.name === 'acl')!.plugins[1]).toEqual({
      name: 'acl',
      enabled: true,
      config: { allow: [], deny: ['banned', 'partners'], hide_groups_header: true },
    });
    // Groups are content: a change of groups alone is a new hash.
    expect(definitionsHash({ ...withGroups, keyAuthCredentials: KEYS })).not.toBe(definitionsHash(withGroups));
  },
);

test('a snapshot key_auth credential must hold a key digest and a unique username', () => {
  const message = toSnapshotMessage(4, { ...DEFS, keyAuthCredentials: KEYS });
  expect(() => fromSnapshotMessage({ ...message, key_auth_credentials: [{ username: 'amy', key_hash: 'amy-key-in-clear' }] })).toThrow(
    /key_auth_credentials\[0\]: key_hash must be a keyed digest/,
  );
  expect(() => fromSnapshotMessage({ ...message, key_auth_credentials: [KEYS[1], { ...KEYS[0], username: 'amy' }] })).toThrow(
    /key_auth_credentials\[1\]: duplicate name "amy"/,
  );
});

test('without key_auth credentials the content hash is the three-kind one it was before key_auth existed', () => {
  const line = (kind: string, messages: object[]) => {
    const sum = messages.reduce<bigint>((acc, m) => acc + BigInt(`0x${sha256('sha256', JSON.stringify(m), 'hex')}`), 0n);
    return `${kind} ${messages.length} ${BigInt.asUintN(256, sum).toString(16).padStart(64, '0')}\n`;
  };
  const expected = sha256(
    'sha256',
    line('apis', DEFS.apis.map(apiMessage)) + line('oauth_servers', DEFS.oauthServers.map(oauthServerMessage)) + line('basic_auth_credentials', []),
    'hex',
  );
  expect(definitionsHash(DEFS)).toBe(expected);
  expect(definitionsHash({ ...DEFS, keyAuthCredentials: [] })).toBe(expected);
  expect(toSnapshotMessage(1, { ...DEFS, keyAuthCredentials: [] })).not.toHaveProperty('key_auth_credentials');
});

test('a delta adds, changes and removes key_auth credentials, and the result hashes as the full content', () => {
  const base = { version: 1, hash: definitionsHash(DEFS), defs: DEFS };
  const withKeys: Definitions = { ...DEFS, keyAuthCredentials: KEYS };
  const added = applyDeltaMessage(base, toDeltaMessage(base, { version: 2, hash: definitionsHash(withKeys), defs: withKeys }));
  expect(added.defs.keyAuthCredentials).toEqual(KEYS);
  expect(added.changes.map((c) => [c.kind, c.name])).toEqual([
    ['key-auth-credential', 'zed'],
    ['key-auth-credential', 'amy'],
  ]);
  const rotated: Definitions = { ...DEFS, keyAuthCredentials: [{ username: 'zed', key_hash: legacyHashApiKey('zed-new-key-0123456789') }] };
  const next = applyDeltaMessage(added, toDeltaMessage(added, { version: 3, hash: definitionsHash(rotated), defs: rotated }));
  expect(next.hash).toBe(definitionsHash(rotated));
  expect(next.defs.keyAuthCredentials).toEqual(rotated.keyAuthCredentials);
  const none = applyDeltaMessage(next, toDeltaMessage(next, { version: 4, hash: definitionsHash(DEFS), defs: DEFS }));
  expect(none.hash).toBe(definitionsHash(DEFS));
  expect(none.defs).not.toHaveProperty('keyAuthCredentials');
});

test('the key_auth installation key travels with key_auth credentials only, in snapshots and deltas, and the hash covers it', () => {
  const INSTALLATION = 'installation-key-of-at-least-32-bytes';
  const withKeys: Definitions = { ...DEFS, keyAuthCredentials: KEYS };
  // Without key_auth credentials: no key, and the hash a snapshot without the key had.
  const plain = toSnapshotMessage(1, DEFS, undefined, INSTALLATION);
  expect(plain).not.toHaveProperty('key_auth_hash_key');
  expect(plain.hash).toBe(definitionsHash(DEFS));
  const message = toSnapshotMessage(2, withKeys, undefined, INSTALLATION);
  expect(message.key_auth_hash_key).toBe(INSTALLATION);
  expect(message.hash).toBe(contentHash(definitionsHash(withKeys), INSTALLATION));
  expect(message.hash).not.toBe(definitionsHash(withKeys));
  const content = fromSnapshotMessage(message);
  expect(content).toMatchObject({ hash: message.hash, keyAuthHashKey: INSTALLATION });
  // Another key, or none, is another content: a message whose key was changed or dropped does not verify.
  expect(() => fromSnapshotMessage({ ...message, key_auth_hash_key: 'another-installation-key-of-32-bytes' })).toThrow(/snapshot hash mismatch/);
  expect(() => fromSnapshotMessage({ ...message, key_auth_hash_key: '' })).toThrow(/snapshot hash mismatch/);
  // A delta carries the key of the content after it; one that adds the first credential brings the key.
  const base = snapshotContent(1, DEFS, definitionsHash(DEFS), INSTALLATION);
  const added = applyDeltaMessage(base, toDeltaMessage(base, snapshotContent(2, withKeys, definitionsHash(withKeys), INSTALLATION)));
  expect(added).toMatchObject({ hash: message.hash, keyAuthHashKey: INSTALLATION });
  const rekeyed = toDeltaMessage(added, snapshotContent(3, withKeys, definitionsHash(withKeys), 'another-installation-key-of-32-bytes'));
  expect(applyDeltaMessage(added, rekeyed).keyAuthHashKey).toBe('another-installation-key-of-32-bytes');
  expect(() => applyDeltaMessage(added, { ...rekeyed, key_auth_hash_key: INSTALLATION })).toThrow(/snapshot hash mismatch/);
  const removed = applyDeltaMessage(added, toDeltaMessage(added, snapshotContent(4, DEFS, definitionsHash(DEFS), INSTALLATION)));
  expect(removed.hash).toBe(definitionsHash(DEFS));
  expect(removed).not.toHaveProperty('keyAuthHashKey');
});

describe('Gateway HTTPS listeners (gateway_tls)', () => {
  // The codec checks the shape only: whether PEM parses is the table build's (data-plane/src/table/gateway-tls.ts).
  const listener = (name: string, hostname: string, key = `key of ${name}`) => ({
    name,
    hostname,
    port: 443,
    certificates: [{ certificate_chain: `chain of ${name}`, private_key: key }],
  });
  const TLS = [listener('ns/gw/b', '*.example.org'), listener('ns/gw/a', 'a.example.org')];

  test.each(decoders)('travel sorted by name in a full snapshot, covered by the hash, through %s', (_name, decode) => {
    const message = toSnapshotMessage(4, DEFS, undefined, undefined, TLS);
    expect(message.gateway_tls?.listeners.map((l) => l.name)).toEqual(['ns/gw/a', 'ns/gw/b']);
    expect(message.hash).toBe(contentHash(definitionsHash(DEFS), undefined, TLS));
    expect(message.hash).not.toBe(definitionsHash(DEFS));
    const back = fromSnapshotMessage(decode(proto.encodeSnapshot(message)) as SnapshotMessage);
    expect(back).toMatchObject({ hash: message.hash, gatewayTls: [TLS[1], TLS[0]] });
    // Without listeners: absent, and the hash of the definitions alone.
    const plain = toSnapshotMessage(4, DEFS, undefined, undefined, []);
    expect(plain).not.toHaveProperty('gateway_tls');
    expect(fromSnapshotMessage(decode(proto.encodeSnapshot(plain)) as SnapshotMessage)).not.toHaveProperty('gatewayTls');
  });

  test('a changed key or a listener left out does not verify; a bad shape is refused', () => {
    const message = toSnapshotMessage(4, DEFS, undefined, undefined, TLS);
    const listeners = message.gateway_tls!.listeners;
    const rekeyed = [{ ...listeners[0], certificates: [{ ...listeners[0].certificates[0], private_key: 'another key' }] }, listeners[1]];
    expect(() => fromSnapshotMessage({ ...message, gateway_tls: { listeners: rekeyed } })).toThrow(/snapshot hash mismatch/);
    expect(() => fromSnapshotMessage({ ...message, gateway_tls: { listeners: [listeners[0]] } })).toThrow(/snapshot hash mismatch/);
    expect(() => fromSnapshotMessage({ ...message, gateway_tls: null })).toThrow(/snapshot hash mismatch/);
    expect(() => fromSnapshotMessage({ ...message, gateway_tls: { listeners: [{ ...listeners[0], certificates: [] }] } })).toThrow(/has no certificate/);
    expect(() => fromSnapshotMessage({ ...message, gateway_tls: { listeners: [{ name: 'x' }] } as never })).toThrow(/VALIDATION_FAILED|must have/);
  });

  test('a delta carries them only when they change: a rotated key, then none left', () => {
    const base = snapshotContent(1, DEFS, definitionsHash(DEFS), undefined, TLS);
    const same = toDeltaMessage(base, snapshotContent(2, DEFS, definitionsHash(DEFS), undefined, [...TLS]));
    expect(same).not.toHaveProperty('gateway_tls');
    expect(applyDeltaMessage(base, same).gatewayTls).toBe(base.gatewayTls);
    const rotated = [listener('ns/gw/b', '*.example.org', 'rotated key'), TLS[1]];
    const delta = toDeltaMessage(base, snapshotContent(3, DEFS, definitionsHash(DEFS), undefined, rotated));
    expect(delta.gateway_tls?.listeners.map((l) => l.certificates[0].private_key)).toEqual(['key of ns/gw/a', 'rotated key']);
    const next = applyDeltaMessage(base, delta);
    expect(next.hash).toBe(contentHash(definitionsHash(DEFS), undefined, rotated));
    // Decoded whole by the data plane's deserializer too (a delta is never lazy).
    const wire = (lazyProto.Client.service.StreamSnapshots.responseDeserialize(proto.wrapPush('n', proto.encodeDelta(delta), 'delta')) as { delta: never })
      .delta;
    expect(applyDeltaMessage(base, wire).hash).toBe(next.hash);
    const none = toDeltaMessage(next, snapshotContent(4, DEFS, definitionsHash(DEFS), undefined, undefined));
    expect(none.gateway_tls).toEqual({ listeners: [] });
    const after = applyDeltaMessage(next, none);
    expect(after.hash).toBe(definitionsHash(DEFS));
    expect(after).not.toHaveProperty('gatewayTls');
  });
});

test("a data plane's deserializer keeps a full snapshot's definitions as bytes, each decoding as the whole message would; other pushes are decoded whole", () => {
  const hash = `scrypt$16384$8$1$${Buffer.alloc(16, 1).toString('base64url')}$${Buffer.alloc(32, 1).toString('base64url')}`;
  const defs: Definitions = { ...DEFS, basicAuthCredentials: [{ username: 'amy', password_hash: hash }], keyAuthCredentials: KEYS };
  const bytes = proto.wrapPush('n7', proto.encodeSnapshot(toSnapshotMessage(2 ** 40, defs, undefined, 'installation-key-of-at-least-32-bytes')));
  type Push = { nonce: string; content: string; snapshot: SnapshotMessage; delta: unknown };
  const whole = proto.Client.service.StreamSnapshots.responseDeserialize(bytes) as Push;
  const lazy = lazyProto.Client.service.StreamSnapshots.responseDeserialize(bytes) as Push;
  expect(lazy).toMatchObject({
    nonce: 'n7',
    content: 'snapshot',
    delta: null,
    snapshot: { version: 2 ** 40, hash: whole.snapshot.hash, key_auth_hash_key: 'installation-key-of-at-least-32-bytes' },
  });
  expect(whole.snapshot.key_auth_hash_key).toBe('installation-key-of-at-least-32-bytes');
  for (const list of ['apis', 'oauth_servers', 'basic_auth_credentials', 'key_auth_credentials'] as const) {
    const items = lazy.snapshot[list]!;
    expect(items.length).toBe(whole.snapshot[list]!.length);
    expect(items.every((item) => item instanceof Uint8Array)).toBe(true);
    expect(items.map((item) => lazy.snapshot.decodeDefinition!(list, item as Uint8Array))).toEqual(whole.snapshot[list]);
  }
  expect(fromSnapshotMessage(lazy.snapshot)).toEqual(fromSnapshotMessage(whole.snapshot));
  const delta = proto.wrapPush(
    'n8',
    proto.encodeDelta({ base_version: 1, base_hash: 'h', version: 2, hash: 'g', apis: [apiMessage(DEFS.apis[0])], removed_apis: ['x'] }),
    'delta',
  );
  expect(lazyProto.Client.service.StreamSnapshots.responseDeserialize(delta)).toEqual(proto.Client.service.StreamSnapshots.responseDeserialize(delta));
});

describe('upstream protocol', () => {
  const api = (name: string, protocol?: string) =>
    parseApiDefinition({ name, proxy: { listen_path: `/${name}/*`, upstreams: { targets: [{ target: 'http://u1:8080' }], ...(protocol && { protocol }) } } });
  const DEFS_WITH: Definitions = { apis: [api('h2', 'http2'), api('h1', 'http1'), api('plain')], oauthServers: [] };

  test.each(decoders)('round-trips through encodeSnapshot and %s; absent stays absent', (_name, decode) => {
    const back = fromSnapshotMessage(decode(proto.encodeSnapshot(toSnapshotMessage(3, DEFS_WITH))) as SnapshotMessage);
    expect(back.hash).toBe(definitionsHash(DEFS_WITH));
    expect(back.defs).toEqual(sortedByName(DEFS_WITH));
    expect(back.defs.apis.find((a) => a.name === 'h2')!.proxy.upstreams.protocol).toBe('http2');
    expect(back.defs.apis.find((a) => a.name === 'plain')!.proxy.upstreams).not.toHaveProperty('protocol');
  });

  test('a definition without it has no protocol member in its message, so its hash is the one before it existed', () => {
    expect(Object.keys(apiMessage(api('plain')).proxy!.upstreams!)).toEqual(['balancing', 'targets']);
    expect(definitionsHash({ apis: [api('plain')], oauthServers: [] })).not.toBe(definitionsHash({ apis: [api('plain', 'http2')], oauthServers: [] }));
  });
});

describe('encoded slashes and target host patterns', () => {
  const api = (name: string, extra: { allow?: boolean; pattern?: string } = {}) =>
    parseApiDefinition({
      name,
      proxy: {
        listen_path: `/${name}/{svc}/*`,
        ...(extra.allow !== undefined && { allow_encoded_slashes: extra.allow }),
        upstreams: { targets: [{ target: 'http://{svc}:8080', ...(extra.pattern !== undefined && { host_pattern: extra.pattern }) }] },
      },
    });
  const DEFS_WITH: Definitions = {
    apis: [api('both', { allow: true, pattern: '[a-z]+\\.ns' }), api('refused', { allow: false, pattern: '' }), api('plain')],
    oauthServers: [],
  };

  test.each(decoders)('round-trips through encodeSnapshot and %s; false and "" are stored as absent', (_name, decode) => {
    const back = fromSnapshotMessage(decode(proto.encodeSnapshot(toSnapshotMessage(3, DEFS_WITH))) as SnapshotMessage);
    expect(back.hash).toBe(definitionsHash(DEFS_WITH));
    expect(back.defs).toEqual(sortedByName(DEFS_WITH));
    const both = back.defs.apis.find((a) => a.name === 'both')!.proxy;
    expect(both.allow_encoded_slashes).toBe(true);
    expect(both.upstreams.targets[0]!.host_pattern).toBe('[a-z]+\\.ns');
    for (const name of ['refused', 'plain']) {
      const proxy = back.defs.apis.find((a) => a.name === name)!.proxy;
      expect(proxy).not.toHaveProperty('allow_encoded_slashes');
      expect(proxy.upstreams.targets[0]).not.toHaveProperty('host_pattern');
    }
  });

  test('a definition without them has neither member in its message, so its hash is the one before they existed', () => {
    const message = apiMessage(api('plain')).proxy!;
    expect(message).not.toHaveProperty('allow_encoded_slashes');
    expect(Object.keys(message.upstreams!.targets[0]!)).toEqual(['target', 'weight']);
    const hash = (a: ApiDefinition) => definitionsHash({ apis: [a], oauthServers: [] });
    expect(hash(api('x', { allow: false, pattern: '' }))).toBe(hash(api('x')));
    expect(hash(api('x', { allow: true }))).not.toBe(hash(api('x')));
    expect(hash(api('x', { pattern: 'a' }))).not.toBe(hash(api('x')));
  });
});

describe('jwt strategy with a JWKS source', () => {
  const server = (name: string, settings: object) =>
    parseOAuthServer({
      name,
      oauth_endpoints: { token: { listen_path: `/${name}/token`, ...target('http://idp') } },
      token_strategy: { name: 'jwt', settings },
    });
  const DEFS_WITH: Definitions = {
    apis: [],
    oauthServers: [
      server('defaults', { jwks_uri: 'https://idp.example/.well-known/jwks.json' }),
      server('every', {
        jwks_uri: 'http://idp:8080/jwks?tenant=a',
        algs: ['ES384', 'RS256'],
        cache_ttl: '1m',
        timeout: '500ms',
        cooldown: '5s',
        max_stale: '2h',
        allow_http: true,
      }),
      server('keys', [{ alg: 'HS256', key: 'k' }]),
    ],
  };

  test.each(decoders)('round-trips through encodeSnapshot and %s; a key list has no jwks member', (_name, decode) => {
    const back = fromSnapshotMessage(decode(proto.encodeSnapshot(toSnapshotMessage(3, DEFS_WITH))) as SnapshotMessage);
    expect(back.hash).toBe(definitionsHash(DEFS_WITH));
    expect(back.defs).toEqual(sortedByName(DEFS_WITH));
  });

  test('round-trips as the plain message (no wire); the hash follows every JWKS setting', () => {
    const msg = toSnapshotMessage(3, DEFS_WITH);
    expect(fromSnapshotMessage(structuredClone(msg))).toEqual({ version: 3, hash: definitionsHash(DEFS_WITH), defs: sortedByName(DEFS_WITH) });
    expect((msg.oauth_servers as OAuthServerMessage[]).map((m) => Object.keys(m.token_strategy).includes('jwks'))).toEqual([true, true, false]);
    const every = DEFS_WITH.oauthServers[1].token_strategy.settings;
    for (const change of [
      { algs: ['ES384'] },
      { cache_ttl: '2m' },
      { timeout: '1s' },
      { cooldown: '6s' },
      { max_stale: '3h' },
      { allow_http: false, jwks_uri: 'https://idp:8080/jwks?tenant=a' },
    ]) {
      const changed = { apis: [], oauthServers: [DEFS_WITH.oauthServers[0], server('every', { ...every, ...change }), DEFS_WITH.oauthServers[2]] };
      expect(definitionsHash(changed)).not.toBe(definitionsHash(DEFS_WITH));
    }
  });
});

describe('balancing least_conn and hash (hash_on)', () => {
  const api = (name: string, upstreams: object) =>
    parseApiDefinition({
      name,
      proxy: { listen_path: `/${name}/*`, upstreams: { targets: [{ target: 'http://u1:8080' }, { target: 'http://u2:8080', weight: 3 }], ...upstreams } },
    });
  const DEFS_WITH: Definitions = {
    apis: [
      api('lc', { balancing: 'least_conn' }),
      api('ip', { balancing: 'hash', hash_on: { source: 'ip' } }),
      api('xff', { balancing: 'hash', hash_on: { source: 'ip', trust_forward_headers: true } }),
      api('user', { balancing: 'hash', hash_on: { source: 'header', name: 'X-User' } }),
      api('session', { balancing: 'hash', hash_on: { source: 'cookie', name: 'Session' } }),
      api('plain', {}),
    ],
    oauthServers: [
      parseOAuthServer({
        name: 'auth',
        oauth_endpoints: {
          token: {
            listen_path: '/auth/token',
            upstreams: { balancing: 'hash', hash_on: { source: 'cookie', name: 'sid' }, targets: [{ target: 'http://a' }, { target: 'http://b' }] },
          },
        },
        token_strategy: { name: 'storage', settings: [] },
      }),
    ],
  };

  test.each(decoders)('round-trips through encodeSnapshot and %s; absent stays absent', (_name, decode) => {
    const back = fromSnapshotMessage(decode(proto.encodeSnapshot(toSnapshotMessage(3, DEFS_WITH))) as SnapshotMessage);
    expect(back.hash).toBe(definitionsHash(DEFS_WITH));
    expect(back.defs).toEqual(sortedByName(DEFS_WITH));
    const upstreams = (name: string) => back.defs.apis.find((a) => a.name === name)!.proxy.upstreams;
    expect(upstreams('lc').balancing).toBe('least_conn');
    expect(upstreams('xff').hash_on).toEqual({ source: 'ip', trust_forward_headers: true });
    expect(upstreams('user').hash_on).toEqual({ source: 'header', name: 'x-user' });
    expect(upstreams('session').hash_on).toEqual({ source: 'cookie', name: 'Session' });
    for (const name of ['lc', 'plain']) expect(upstreams(name)).not.toHaveProperty('hash_on');
    expect(back.defs.oauthServers[0].oauth_endpoints.token.upstreams.hash_on).toEqual({ source: 'cookie', name: 'sid' });
  });

  test('round-trips as the plain message (no wire)', () => {
    expect(fromSnapshotMessage(structuredClone(toSnapshotMessage(3, DEFS_WITH)))).toEqual({
      version: 3,
      hash: definitionsHash(DEFS_WITH),
      defs: sortedByName(DEFS_WITH),
    });
  });

  test('a hash_on added by a delta travels through encodeDelta and applies', () => {
    expectDeltaApplies(
      { apis: [api('x', {})], oauthServers: [] },
      { apis: [api('x', { balancing: 'hash', hash_on: { source: 'header', name: 'X-User' } })], oauthServers: [] },
    );
  });

  test('the message holds the members of its source only; without hash_on there is no member, so the hash is the one before it existed', () => {
    const upstreamsMessage = (name: string) => apiMessage(DEFS_WITH.apis.find((a) => a.name === name)!).proxy!.upstreams!;
    expect(upstreamsMessage('ip').hash_on).toEqual({ source: 'ip', trust_forward_headers: false });
    expect(upstreamsMessage('user').hash_on).toEqual({ source: 'header', name: 'x-user' });
    expect(Object.keys(upstreamsMessage('lc'))).toEqual(['balancing', 'targets']);
    expect(definitionsHash(DEFS)).toBe(PINNED_DEFS_HASH);
  });

  test('the hash follows the balancing and every member of hash_on', () => {
    const hashOf = (upstreams: object) => definitionsHash({ apis: [api('x', upstreams)], oauthServers: [] });
    const hashes = [
      hashOf({}),
      hashOf({ balancing: 'least_conn' }),
      hashOf({ balancing: 'hash', hash_on: { source: 'ip' } }),
      hashOf({ balancing: 'hash', hash_on: { source: 'ip', trust_forward_headers: true } }),
      hashOf({ balancing: 'hash', hash_on: { source: 'header', name: 'a' } }),
      hashOf({ balancing: 'hash', hash_on: { source: 'header', name: 'b' } }),
      hashOf({ balancing: 'hash', hash_on: { source: 'cookie', name: 'a' } }),
    ];
    expect(new Set(hashes).size).toBe(hashes.length);
  });
});

/** The delta from `base` to `next`, through encodeDelta and the client's deserializer, applies on top of `base` and gives `next`. */
function expectDeltaApplies(base: Definitions, next: Definitions): void {
  const baseContent = { version: 1, hash: definitionsHash(base), defs: base };
  const delta = toDeltaMessage(baseContent, { version: 2, hash: definitionsHash(next), defs: next });
  const decoded = (proto.Client.service.StreamSnapshots.responseDeserialize(proto.wrapPush('n1', proto.encodeDelta(delta), 'delta')) as { delta: never }).delta;
  const applied = applyDeltaMessage(baseContent, decoded);
  expect(applied.hash).toBe(definitionsHash(next));
  expect(applied.defs.apis).toEqual(next.apis);
}

describe('proxy.match_headers', () => {
  const api = (name: string, match_headers?: unknown) =>
    parseApiDefinition({ name, proxy: { listen_path: '/api/*', ...target('http://u1:8080'), ...(match_headers !== undefined && { match_headers }) } });
  const DEFS_WITH: Definitions = {
    apis: [api('canary', { 'X-Canary': ['true'], 'Accept-Version': ['v2', 'v2.1'] }), api('stable')],
    oauthServers: [
      parseOAuthServer({
        name: 'auth',
        oauth_endpoints: { token: { listen_path: '/auth/token', match_headers: { 'X-Tenant': ['a'] }, ...target('http://auth') } },
        token_strategy: { name: 'storage', settings: [] },
      }),
    ],
  };

  test.each(decoders)('round-trips through encodeSnapshot and %s; absent stays absent', (_name, decode) => {
    const back = fromSnapshotMessage(decode(proto.encodeSnapshot(toSnapshotMessage(3, DEFS_WITH))) as SnapshotMessage);
    expect(back.hash).toBe(definitionsHash(DEFS_WITH));
    expect(back.defs).toEqual(sortedByName(DEFS_WITH));
    expect(back.defs.apis.find((a) => a.name === 'canary')!.proxy.match_headers).toEqual({ 'accept-version': ['v2', 'v2.1'], 'x-canary': ['true'] });
    expect(back.defs.apis.find((a) => a.name === 'stable')!.proxy).not.toHaveProperty('match_headers');
    expect(back.defs.oauthServers[0].oauth_endpoints.token.match_headers).toEqual({ 'x-tenant': ['a'] });
  });

  test('round-trips as the plain message (no wire)', () => {
    expect(fromSnapshotMessage(structuredClone(toSnapshotMessage(3, DEFS_WITH)))).toEqual({
      version: 3,
      hash: definitionsHash(DEFS_WITH),
      defs: sortedByName(DEFS_WITH),
    });
  });

  test('a condition added by a delta travels through encodeDelta and applies', () => {
    expectDeltaApplies({ apis: [api('stable')], oauthServers: [] }, { apis: [api('stable', { 'X-Canary': ['true'] })], oauthServers: [] });
  });

  test('a definition without it has no match_headers member in its message, so its hash is the one before it existed', () => {
    expect(Object.keys(apiMessage(api('stable')).proxy!)).not.toContain('match_headers');
    expect(definitionsHash(DEFS)).toBe(PINNED_DEFS_HASH);
    expect(definitionsHash({ apis: [api('stable', {})], oauthServers: [] })).toBe(definitionsHash({ apis: [api('stable')], oauthServers: [] }));
  });

  test("the wire's empty map, which every proxy without conditions decodes with, is read as absent", () => {
    const message = proto.Client.service.StreamSnapshots.responseDeserialize(
      proto.wrapPush('n1', proto.encodeSnapshot(toSnapshotMessage(1, { apis: [api('stable')], oauthServers: [] }))),
    ) as {
      snapshot: SnapshotMessage;
    };
    expect((message.snapshot.apis[0] as { proxy: { match_headers: unknown } }).proxy.match_headers).toEqual({});
    expect(fromSnapshotMessage(message.snapshot).defs.apis[0].proxy).not.toHaveProperty('match_headers');
  });

  test('the hash follows the conditions, not the order they were written in', () => {
    const hashOf = (h?: unknown) => definitionsHash({ apis: [api('x', h)], oauthServers: [] });
    expect(hashOf({ 'X-A': ['1', '2'], 'X-B': ['3'] })).toBe(hashOf({ 'x-b': ['3'], 'x-a': ['2', '1'] }));
    const hashes = [
      hashOf(),
      hashOf({ 'X-A': ['1'] }),
      hashOf({ 'X-A': ['2'] }),
      hashOf({ 'X-B': ['1'] }),
      hashOf({ 'X-A': ['1', '2'] }),
      hashOf({ 'X-A': ['1'], 'X-B': ['1'] }),
    ];
    expect(new Set(hashes).size).toBe(hashes.length);
  });
});

describe('upstream health checks', () => {
  const upstreams = (health_check?: unknown) => ({
    balancing: 'weight',
    targets: [{ target: 'http://u1:8080', weight: 2 }, { target: 'http://u2:8080' }],
    health_check,
  });
  /** The definition whose hash below was computed with the codec of commit 11e399d, before health checks existed. */
  const unchecked = () => parseApiDefinition({ name: 'unchecked', proxy: { listen_path: '/u/*', upstreams: upstreams() } });
  const UNCHECKED_HASH = 'a7c43714e206d81600dcae66a1ac5a79bc9806f34048d2e7e82486e00395184c';
  const CHECKED: Definitions = {
    apis: [
      parseApiDefinition({
        name: 'both',
        proxy: {
          listen_path: '/both/*',
          upstreams: upstreams({
            active: { path: '/healthz?deep=1', interval: '5s', timeout: '500ms', healthy_threshold: 4, unhealthy_threshold: 1 },
            passive: { unhealthy_threshold: 9, ejection: '1m' },
          }),
        },
      }),
      parseApiDefinition({ name: 'active-only', proxy: { listen_path: '/active/*', upstreams: upstreams({ active: { path: '/' } }) } }),
      parseApiDefinition({ name: 'passive-only', proxy: { listen_path: '/passive/*', upstreams: upstreams({ passive: {} }) } }),
      parseApiDefinition({
        name: 'options',
        proxy: {
          listen_path: '/options/*',
          upstreams: upstreams({
            active: { path: '/h', method: 'HEAD', statuses: [200, 418], headers: { 'X-Probe': '1', Host: 'health.internal' } },
            passive: { statuses: [429, 500] },
          }),
        },
      }),
      unchecked(),
      // gRPC checks: the default service "" must survive the wire as a check (a set message), not as none.
      parseApiDefinition({ name: 'grpc-whole', proxy: { listen_path: '/gw/*', upstreams: { ...upstreams({ active: { grpc: {} } }), protocol: 'http2' } } }),
      parseApiDefinition({
        name: 'grpc-named',
        proxy: { listen_path: '/gn/*', upstreams: { ...upstreams({ active: { grpc: { service: 'a.B' }, interval: '1s' } }), protocol: 'http2' } },
      }),
    ],
    oauthServers: [
      parseOAuthServer({
        name: 'checked-server',
        oauth_endpoints: {
          token: { listen_path: '/c/token', upstreams: { targets: [{ target: 'http://auth' }], health_check: { passive: { ejection: '10s' } } } },
        },
        token_strategy: { name: 'storage', settings: [] },
      }),
    ],
  };

  test.each(decoders)('definitions with health checks round-trip through encodeSnapshot and %s', (_name, decode) => {
    const msg = toSnapshotMessage(9, CHECKED);
    const back = fromSnapshotMessage(decode(proto.encodeSnapshot(msg)) as SnapshotMessage);
    expect(back.hash).toBe(definitionsHash(CHECKED));
    expect(back.defs).toEqual(sortedByName(CHECKED));
    const both = back.defs.apis.find((a) => a.name === 'both')!;
    expect(both.proxy.upstreams.health_check).toEqual({
      active: { path: '/healthz?deep=1', interval: '5s', timeout: '500ms', healthy_threshold: 4, unhealthy_threshold: 1 },
      passive: { unhealthy_threshold: 9, ejection: '1m' },
    });
    // A part not configured stays absent after the wire (where it decodes as null), and so does a check not configured.
    expect(back.defs.apis.find((a) => a.name === 'active-only')!.proxy.upstreams.health_check).toEqual({
      active: { path: '/', interval: '10s', timeout: '2s', healthy_threshold: 2, unhealthy_threshold: 3 },
    });
    expect(back.defs.apis.find((a) => a.name === 'passive-only')!.proxy.upstreams.health_check).toEqual({
      passive: { unhealthy_threshold: 5, ejection: '30s' },
    });
    expect(back.defs.apis.find((a) => a.name === 'grpc-whole')!.proxy.upstreams.health_check).toEqual({
      active: { interval: '10s', timeout: '2s', healthy_threshold: 2, unhealthy_threshold: 3, grpc: { service: '' } },
    });
    expect(back.defs.apis.find((a) => a.name === 'grpc-named')!.proxy.upstreams.health_check!.active).toMatchObject({
      grpc: { service: 'a.B' },
      interval: '1s',
    });
    expect(back.defs.apis.find((a) => a.name === 'active-only')!.proxy.upstreams.health_check!.active).not.toHaveProperty('grpc');
    expect(back.defs.apis.find((a) => a.name === 'unchecked')!.proxy.upstreams).not.toHaveProperty('health_check');
    expect(back.defs.oauthServers[0].oauth_endpoints.token.upstreams.health_check).toEqual({ passive: { unhealthy_threshold: 5, ejection: '10s' } });
    // The probe's method, statuses and headers and the passive statuses arrive as written; unset ones stay absent (above).
    expect(back.defs.apis.find((a) => a.name === 'options')!.proxy.upstreams.health_check).toEqual({
      active: {
        path: '/h',
        interval: '10s',
        timeout: '2s',
        healthy_threshold: 2,
        unhealthy_threshold: 3,
        method: 'HEAD',
        statuses: [200, 418],
        headers: { Host: 'health.internal', 'X-Probe': '1' },
      },
      passive: { unhealthy_threshold: 5, ejection: '30s', statuses: [429, 500] },
    });
  });

  test('a check without method, statuses or headers has none of them in its message, so its hash is the one before they existed', () => {
    const { active, passive } = apiMessage(CHECKED.apis[0]).proxy!.upstreams!.health_check!;
    expect(Object.keys(active!)).toEqual(['path', 'interval', 'timeout', 'healthy_threshold', 'unhealthy_threshold']);
    expect(Object.keys(passive!)).toEqual(['unhealthy_threshold', 'ejection']);
  });

  test('definitions with health checks round-trip as the plain message (no wire)', () => {
    expect(fromSnapshotMessage(structuredClone(toSnapshotMessage(9, CHECKED)))).toEqual({
      version: 9,
      hash: definitionsHash(CHECKED),
      defs: sortedByName(CHECKED),
    });
  });

  test('a health check added by a delta travels through encodeDelta and applies', () => {
    expectDeltaApplies({ apis: [unchecked()], oauthServers: [] }, { apis: [CHECKED.apis[0]], oauthServers: [] });
  });

  test('a definition without a health check keeps the hash it had before the feature: its message has no health_check member', () => {
    const api = unchecked();
    expect(Object.keys(apiMessage(api).proxy!.upstreams!)).toEqual(['balancing', 'targets']);
    expect(definitionsHash({ apis: [api], oauthServers: [] })).toBe(UNCHECKED_HASH);
  });

  test('a part not configured is no member of the message either', () => {
    expect(Object.keys(apiMessage(CHECKED.apis[1]).proxy!.upstreams!.health_check!)).toEqual(['active']);
    expect(Object.keys(apiMessage(CHECKED.apis[2]).proxy!.upstreams!.health_check!)).toEqual(['passive']);
  });

  test('the hash changes with the health check: added, a threshold, an ejection, a part added', () => {
    const hashOf = (check?: unknown) =>
      definitionsHash({ apis: [parseApiDefinition({ name: 'unchecked', proxy: { listen_path: '/u/*', upstreams: upstreams(check) } })], oauthServers: [] });
    const hashes = [
      hashOf(),
      hashOf({ passive: {} }),
      hashOf({ passive: { unhealthy_threshold: 6 } }),
      hashOf({ passive: { ejection: '31s' } }),
      hashOf({ active: { path: '/' }, passive: {} }),
      hashOf({ active: { path: '/other' }, passive: {} }),
      hashOf({ active: { path: '/other', method: 'HEAD' }, passive: {} }),
      hashOf({ active: { path: '/other', statuses: [200] }, passive: {} }),
      hashOf({ active: { path: '/other', headers: { Host: 'h' } }, passive: {} }),
      hashOf({ active: { path: '/other' }, passive: { statuses: [500] } }),
    ];
    expect(hashes[0]).toBe(UNCHECKED_HASH);
    expect(new Set(hashes).size).toBe(hashes.length);
  });

  test('the hash of a health check does not depend on the order of its keys', () => {
    const reversed = (value: unknown): unknown =>
      Array.isArray(value)
        ? value.map(reversed)
        : value && typeof value === 'object'
          ? Object.fromEntries(
              Object.entries(value)
                .reverse()
                .map(([k, v]) => [k, reversed(v)]),
            )
          : value;
    const defs = reversed(CHECKED) as Definitions;
    expect(Object.keys(defs.apis[0].proxy.upstreams.health_check!.active!)[0]).toBe('unhealthy_threshold');
    expect(definitionsHash(defs)).toBe(definitionsHash(CHECKED));
  });
});

/** definitionsHash(DEFS) as the codec of the release before proxy_cache computed it. */
const PINNED_DEFS_HASH = 'd1b684c5b80a6e5ef15334e5827455aae01ee1784c06c59b2c79b4fcb25ea10f';

describe('proxy_cache', () => {
  const cachedApi = (name: string, config: unknown) =>
    parseApiDefinition({ name, proxy: { listen_path: `/${name}/*`, ...target('http://c:1') }, plugins: [{ name: 'proxy_cache', config }] });
  // content_types and vary_query_params: null (absent), [] and a list are three different configs.
  const CACHED: Definitions = {
    apis: [
      cachedApi('pc-defaults', {}),
      cachedApi('pc-empty', { vary_query_params: [] }),
      cachedApi('pc-lists', { content_types: ['text/*'], vary_query_params: ['page'], vary_headers: ['X-Tenant'], ttl: '2h', statuses: [200] }),
    ],
    oauthServers: [],
  };

  test.each(decoders)('null, empty and listed nullable lists round-trip through encodeSnapshot and %s', (_name, decode) => {
    const msg = toSnapshotMessage(3, CACHED);
    const back = fromSnapshotMessage(decode(proto.encodeSnapshot(msg)) as SnapshotMessage);
    expect(back.defs).toEqual(sortedByName(CACHED));
    expect(back.defs.apis.map((a) => a.plugins[0].config)).toEqual([
      expect.objectContaining({ content_types: null, vary_query_params: null }),
      expect.objectContaining({ content_types: null, vary_query_params: [] }),
      expect.objectContaining({ content_types: ['text/*'], vary_query_params: ['page'] }),
    ]);
    expect(back.hash).toBe(definitionsHash(CACHED));
  });

  test('the nullable lists travel in a StringList message, absent when null', () => {
    const [defaults, empty] = CACHED.apis.map((a) => apiMessage(a).plugins[0].proxy_cache);
    expect(defaults).toMatchObject({ content_types: null, vary_query_params: null });
    expect(empty).toMatchObject({ content_types: null, vary_query_params: { values: [] } });
    expect(definitionsHash({ ...CACHED, apis: [CACHED.apis[0]] })).not.toBe(
      definitionsHash({ ...CACHED, apis: [cachedApi('pc-defaults', { vary_query_params: [] })] }),
    );
  });

  test('configurations without proxy_cache keep the hash they had before it existed', () => {
    // Pinned at the release before proxy_cache: every other plugin's message is its sorted config, as then.
    expect(definitionsHash(DEFS)).toBe(PINNED_DEFS_HASH);
  });
});

describe('request_termination, redirect, request_mirror and openid_connect', () => {
  const answering = (name: string, plugin: string, config: unknown) =>
    parseApiDefinition({ name, proxy: { listen_path: `/${name}/*`, ...target('http://c:1') }, plugins: [{ name: plugin, config }] });
  // Their `optional` members: an empty body is not an unset one, nor is an empty message; an unset port is not 0.
  const ANSWERING: Definitions = {
    apis: [
      answering('rt-default', 'request_termination', {}),
      answering('rt-empty-body', 'request_termination', { status_code: 200, body: '', content_type: 'text/plain' }),
      answering('rt-empty-message', 'request_termination', { message: '' }),
      answering('rt-no-content', 'request_termination', { status_code: 204 }),
      answering('rd-scheme', 'redirect', { scheme: 'https' }),
      answering('rd-all', 'redirect', { status_code: 308, scheme: 'http', host: 'n.example.com', port: 8443, path: '/v2', strip_path: true }),
      answering('rm-none', 'request_mirror', { target: 'http://m:1', percentage: 0 }),
      answering('rm-part', 'request_mirror', { target: 'HTTPS://M.example', percentage: 0.5 }),
      answering('oidc', 'openid_connect', {
        issuer: 'https://idp.example',
        client_id: 'app',
        client_secret: 's 1',
        cookie_secret: 'k'.repeat(32),
        scopes: ['email'],
        claims_to_headers: { email: 'X-Email' },
      }),
      answering('oidc-min', 'openid_connect', { issuer: 'http://127.0.0.1:9', client_id: 'app', client_secret: 's', cookie_secret: 'k'.repeat(32) }),
    ],
    oauthServers: [],
  };

  test.each(decoders)('set, empty and unset members round-trip through encodeSnapshot and %s', (_name, decode) => {
    const back = fromSnapshotMessage(decode(proto.encodeSnapshot(toSnapshotMessage(4, ANSWERING))) as SnapshotMessage);
    expect(back.defs).toEqual(sortedByName(ANSWERING));
    expect(back.defs.apis.map((a) => [a.name, a.plugins[0].config])).toEqual([
      ['oidc', expect.objectContaining({ scopes: ['openid', 'email'], claims_to_headers: { email: 'X-Email' }, client_secret: 's 1', allow_http: false })],
      ['oidc-min', expect.not.objectContaining({ claims_to_headers: expect.anything() })],
      ['rd-all', { status_code: 308, scheme: 'http', host: 'n.example.com', port: 8443, path: '/v2', strip_path: true }],
      ['rd-scheme', { status_code: 302, scheme: 'https', strip_path: false }],
      ['rm-none', { target: 'http://m:1', percentage: 0 }],
      ['rm-part', { target: 'https://m.example', percentage: 0.5 }],
      ['rt-default', { status_code: 503, message: 'request terminated' }],
      ['rt-empty-body', { status_code: 200, body: '', content_type: 'text/plain' }],
      ['rt-empty-message', { status_code: 503, message: '' }],
      ['rt-no-content', { status_code: 204 }],
    ]);
    expect(back.hash).toBe(definitionsHash(ANSWERING));
  });
});

describe('request_validator', () => {
  // Key order not sorted, a key with JSON-escaped characters, `{}` and `[]`: the schema is sent as its JSON text.
  const SCHEMA = { type: 'object', required: ['b', 'a'], properties: { b: { type: 'array', items: {} }, a: { const: 'x"\n\u00e9' } }, $defs: {} };
  const VALIDATED: Definitions = {
    apis: [
      parseApiDefinition({
        name: 'rv',
        proxy: { listen_path: '/rv/*', ...target('http://c:1') },
        plugins: [{ name: 'request_validator', config: { body_schema: SCHEMA, body_required: true } }],
      }),
    ],
    oauthServers: [],
  };

  test.each(decoders)('the schema, as written, and the other members round-trip through encodeSnapshot and %s', (_name, decode) => {
    const back = fromSnapshotMessage(decode(proto.encodeSnapshot(toSnapshotMessage(5, VALIDATED))) as SnapshotMessage);
    expect(back.defs).toEqual(VALIDATED);
    const config = back.defs.apis[0].plugins[0].config as { body_schema: object };
    expect(JSON.stringify(config.body_schema)).toBe(JSON.stringify(SCHEMA));
    expect(back.hash).toBe(definitionsHash(VALIDATED));
  });

  test('the schema travels as its JSON text', () => {
    expect(apiMessage(VALIDATED.apis[0]).plugins[0].request_validator).toEqual({
      allowed_content_types: ['application/json'],
      body_required: true,
      body_schema: JSON.stringify(SCHEMA),
      max_body_bytes: 1024 * 1024,
    });
  });
});
