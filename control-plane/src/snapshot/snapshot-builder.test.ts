import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import protobuf from 'protobufjs';
import { PROTO_PATH, loadGatehouseProto } from '#proto/grpc';
import { createLogger } from '#proto/logger';
import { parseApiDefinition, type Definitions } from '#proto/definition/index';
import { definitionsHash } from '#proto/snapshot/codec';
import { openFileStore } from '../store/file-store.js';
import type { DefinitionStore } from '../store/index.js';
import { createSnapshotBuilder, RECENT_VERSIONS, type EncodedSnapshot, type SnapshotBuilder } from './snapshot-builder.js';

const logger = createLogger('control-plane', 'silent');
const proto = loadGatehouseProto();
const Snapshot = protobuf.loadSync(PROTO_PATH).lookupType('gatehouse.v1.Snapshot');
const Delta = new protobuf.Root().loadSync(PROTO_PATH, { keepCase: true }).lookupType('gatehouse.v1.SnapshotDelta');

const withApi =
  (name: string) =>
  (defs: Definitions): Definitions => ({
    ...defs,
    apis: [
      ...defs.apis,
      parseApiDefinition({ name, proxy: { listen_path: `/${name}/*`, upstreams: { balancing: 'roundrobin', targets: [{ target: 'http://u' }] } } }),
    ],
  });

let dir: string;
let store: DefinitionStore;
let builder: SnapshotBuilder;
let encodes: number;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'gatehouse-snapshot-'));
  store = await openFileStore({ dataDir: dir, logger });
  encodes = 0;
  builder = createSnapshotBuilder({
    store,
    encodeSnapshot: (message) => {
      encodes++;
      return proto.encodeSnapshot(message);
    },
    encodeDelta: proto.encodeDelta,
    logger,
  });
});

afterEach(async () => {
  builder.close();
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

describe('snapshot builder', () => {
  test('the initial snapshot is the store content at its revision', () => {
    const current = builder.current();
    expect(current).toMatchObject({ version: 1, hash: definitionsHash({ apis: [], oauthServers: [] }) });
    expect(Snapshot.toObject(Snapshot.decode(current.bytes), { longs: Number, defaults: true })).toMatchObject({
      version: 1,
      hash: current.hash,
      apis: [],
    });
  });

  test('each store change becomes one version, encoded once and announced to subscribers', async () => {
    const seen: EncodedSnapshot[] = [];
    builder.subscribe((s) => seen.push(s));
    await store.update(withApi('a'));
    expect(seen.map((s) => s.version)).toEqual([2]);
    expect(builder.current()).toBe(seen[0]);
    expect(builder.current().bytes).toBe(builder.current().bytes);
    expect(encodes).toBe(2); // the initial snapshot at start, then this version's when first read (a connect), once
    const decoded = Snapshot.toObject(Snapshot.decode(seen[0].bytes), { longs: Number }) as { version: number; hash: string; apis: Array<{ name: string }> };
    expect(decoded.version).toBe(2);
    expect(decoded.hash).toBe(store.current().hash);
    expect(decoded.apis.map((a) => a.name)).toEqual(['a']);
  });

  test('an unchanged store produces no version and no event', async () => {
    const seen: EncodedSnapshot[] = [];
    builder.subscribe((s) => seen.push(s));
    await store.update((defs) => ({ ...defs }));
    expect(seen).toEqual([]);
    expect(builder.current().version).toBe(1);
    expect(encodes).toBe(1);
  });

  test('each version after the first carries the delta from the one before: what changed, by name', async () => {
    expect(builder.current().delta).toBeNull();
    await store.update(withApi('a'));
    await store.update(withApi('b'));
    const current = builder.current();
    expect(current.delta).toMatchObject({ baseVersion: 2, size: 1 });
    await store.update((defs) => ({ ...defs, apis: defs.apis.filter((a) => a.name !== 'a') }));
    const removal = builder.current();
    const decoded = Delta.toObject(Delta.decode(removal.delta!.bytes), { longs: Number, defaults: true, arrays: true });
    expect(decoded).toMatchObject({ base_version: 3, base_hash: current.hash, version: 4, hash: removal.hash, apis: [], removed_apis: ['a'] });
    const added = Delta.toObject(Delta.decode(current.delta!.bytes), { longs: Number, defaults: true, arrays: true }) as { apis: { name: string }[] };
    expect(added.apis.map((a) => a.name)).toEqual(['b']);
    expect(current.delta!.baseHash).toBe(definitionsHash(withApi('a')({ apis: [], oauthServers: [] })));
  });

  test('deltaFrom: a delta from any of the recent versions, an empty one from the current content under another version, none from an older one', async () => {
    const decode = (bytes: Buffer) =>
      Delta.toObject(Delta.decode(bytes), { longs: Number, defaults: true, arrays: true }) as {
        base_version: number;
        base_hash: string;
        version: number;
        hash: string;
        apis: { name: string }[];
        removed_apis: string[];
      };
    const first = builder.current();
    await store.update(withApi('a'));
    const second = builder.current();
    await store.update(withApi('b'));
    await store.update((defs) => ({ ...defs, apis: defs.apis.filter((a) => a.name !== 'a') }));
    const current = builder.current();
    expect(current.deltaFrom(3, current.delta!.baseHash)).toBe(current.delta);
    // From version 2 (holding a): b added and a removed in one delta; from version 1 (empty): only b.
    const fromSecond = current.deltaFrom(second.version, second.hash)!;
    expect(fromSecond).toMatchObject({ baseVersion: 2, baseHash: second.hash, size: 2 });
    expect(decode(fromSecond.bytes)).toMatchObject({ base_version: 2, version: 4, hash: current.hash, apis: [{ name: 'b' }], removed_apis: ['a'] });
    expect(current.deltaFrom(second.version, second.hash)).toBe(fromSecond);
    expect(decode(current.deltaFrom(first.version, first.hash)!.bytes)).toMatchObject({ base_version: 1, apis: [{ name: 'b' }], removed_apis: [] });
    // The same content under a version this CP never built (a data plane of its previous run): an empty delta.
    const rebase = current.deltaFrom(77, current.hash)!;
    expect(rebase).toMatchObject({ baseVersion: 77, baseHash: current.hash, size: 0 });
    expect(decode(rebase.bytes)).toMatchObject({ base_version: 77, version: 4, hash: current.hash, apis: [], removed_apis: [] });
    // A version with another hash, or one this CP never built, is no base.
    expect(current.deltaFrom(second.version, first.hash)).toBeNull();
    expect(current.deltaFrom(77, second.hash)).toBeNull();
    // The current version and the RECENT_VERSIONS - 1 before it are bases; the one before those is not.
    for (let i = 1; i < RECENT_VERSIONS; i++) await store.update(withApi(`n${i}`));
    expect(builder.current().deltaFrom(second.version, second.hash)).toBeNull();
    expect(builder.current().deltaFrom(current.version, current.hash)).toMatchObject({ baseVersion: 4, size: RECENT_VERSIONS - 1 });
    await store.update(withApi('last'));
    expect(builder.current().deltaFrom(current.version, current.hash)).toBeNull();
  });

  test('after close no more versions are built', async () => {
    builder.close();
    await store.update(withApi('a'));
    expect(builder.current().version).toBe(1);
  });
});
