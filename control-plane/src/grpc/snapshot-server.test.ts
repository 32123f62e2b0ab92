import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { CHANNEL_OPTIONS, loadGatehouseProto } from '#proto/grpc';
import { createLogger } from '#proto/logger';
import type * as wire from '#proto/wire';
import { parseApiDefinition, type Definitions } from '#proto/definition/index';
import { openFileStore } from '../store/file-store.js';
import type { DefinitionStore } from '../store/index.js';
import { createSnapshotBuilder, type SnapshotBuilder } from '../snapshot/snapshot-builder.js';
import { createSnapshotServer, type DataPlaneStatus, type SnapshotServer } from './snapshot-server.js';

const logger = createLogger('control-plane', 'silent');
const proto = loadGatehouseProto();

/** The test reads `snapshot` only from pushes it knows to be full ones. */
type Push = wire.SnapshotPush & { snapshot: wire.Snapshot };

const withApi =
  (name: string) =>
  (defs: Definitions): Definitions => ({
    ...defs,
    apis: [
      ...defs.apis,
      parseApiDefinition({
        name,
        proxy: { listen_path: `/${name}/*`, upstreams: { balancing: 'roundrobin', targets: [{ target: 'http://127.0.0.1:9000' }] } },
      }),
    ],
  });

/** A data plane as the wire sees it: a real grpc-js client on a real port. */
function connect(port: number) {
  const client = new proto.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), CHANNEL_OPTIONS);
  const call = (client as unknown as { StreamSnapshots(): grpc.ClientDuplexStream<object, Push> }).StreamSnapshots();
  const received: Push[] = [];
  let wake: (() => void) | null = null;
  let ended = false;
  call.on('data', (push: Push) => {
    received.push(push);
    wake?.();
  });
  call.on('error', () => undefined);
  call.on('end', () => {
    ended = true;
    wake?.();
  });
  let read = 0;
  return {
    send: (message: object) => call.write(message),
    hello: (id: string, extra: object = {}) => call.write({ hello: { id, hostname: `${id}.local`, proxy_address: '127.0.0.1:8080', ...extra } }),
    async next(timeoutMs = 5000): Promise<Push> {
      const deadline = Date.now() + timeoutMs;
      while (read >= received.length) {
        if (Date.now() > deadline) throw new Error('no push received');
        await new Promise<void>((resolve) => {
          wake = resolve;
          setTimeout(resolve, 50);
        });
      }
      return received[read++];
    },
    async expectNoPush(ms = 300): Promise<void> {
      await new Promise((resolve) => setTimeout(resolve, ms));
      expect(received.slice(read)).toEqual([]);
    },
    ended: () => ended,
    close() {
      call.cancel();
      client.close();
    },
  };
}

async function until<T>(probe: () => T | undefined | null | false, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

let dir: string;
let store: DefinitionStore;
let builder: SnapshotBuilder;
let server: SnapshotServer;
let port: number;
let clients: Array<ReturnType<typeof connect>>;
const counts = { push: 0, ack: 0, nack: 0, connect: 0, disconnect: 0 };
const t0 = new Date('2030-01-02T03:04:05.000Z');

const dataPlane = (id: string): DataPlaneStatus | undefined => server.dataPlanes().find((d) => d.id === id);

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'gatehouse-grpc-'));
  store = await openFileStore({ dataDir: dir, logger });
  builder = createSnapshotBuilder({ store, encodeSnapshot: proto.encodeSnapshot, encodeDelta: proto.encodeDelta, logger });
  Object.assign(counts, { push: 0, ack: 0, nack: 0, connect: 0, disconnect: 0 });
  server = createSnapshotServer({
    snapshots: builder,
    service: proto.service,
    wrapPush: proto.wrapPush,
    credentials: grpc.ServerCredentials.createInsecure(),
    logger,
    now: () => t0,
    callbacks: {
      onPush: () => counts.push++,
      onAck: () => counts.ack++,
      onNack: () => counts.nack++,
      onConnect: () => counts.connect++,
      onDisconnect: () => counts.disconnect++,
    },
  });
  port = await server.listen('127.0.0.1', 0);
  clients = [];
});

afterEach(async () => {
  for (const c of clients) c.close();
  await server.close(1000);
  builder.close();
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

const open = () => {
  const c = connect(port);
  clients.push(c);
  return c;
};

describe('snapshot server', () => {
  test('Hello → the current snapshot, and the data plane is listed with its identity', async () => {
    await store.update(withApi('a'));
    const dp = open();
    dp.hello('dp-1', { software_version: '1.2.3' });
    const push = await dp.next();
    expect(push.nonce).toBe('1');
    expect(push.snapshot).toMatchObject({ version: 2, hash: builder.current().hash });
    expect(push.snapshot.apis.map((a) => a.name)).toEqual(['a']);
    const status = await until(() => dataPlane('dp-1'));
    expect(status).toMatchObject({
      id: 'dp-1',
      hostname: 'dp-1.local',
      proxy_address: '127.0.0.1:8080',
      software_version: '1.2.3',
      connected_since: t0.toISOString(),
      version: null,
      hash: null,
      last_ack: null,
      last_nack: null,
    });
    expect(status.address).toMatch(/127\.0\.0\.1/);
    expect(counts).toMatchObject({ connect: 1, push: 1 });
  });

  test('nothing is pushed before Hello', async () => {
    const dp = open();
    await dp.expectNoPush();
    expect(server.dataPlanes()).toEqual([]);
  });

  test('a store write pushes the new version to every data plane with a per-stream increasing nonce', async () => {
    const [one, two] = [open(), open()];
    one.hello('dp-1');
    two.hello('dp-2');
    await one.next();
    await two.next();
    await store.update(withApi('a'));
    const [p1, p2] = [await one.next(), await two.next()];
    expect(p1.nonce).toBe('2');
    expect(p2.nonce).toBe('2');
    expect(p1.snapshot).toEqual(p2.snapshot);
    expect(p1.snapshot.version).toBe(2); // fresh store at revision 1, one write
    await store.update(withApi('b'));
    expect((await one.next()).nonce).toBe('3');
  });

  test('an ACK echoing the last nonce records version, hash and time', async () => {
    const dp = open();
    dp.hello('dp-1');
    const push = await dp.next();
    dp.send({ ack: { version: push.snapshot.version, nonce: push.nonce } });
    const status = await until(() => dataPlane('dp-1')?.last_ack && dataPlane('dp-1'));
    expect(status).toMatchObject({
      version: push.snapshot.version,
      hash: push.snapshot.hash,
      last_ack: { version: push.snapshot.version, at: t0.toISOString() },
      last_nack: null,
    });
    expect(counts.ack).toBe(1);
  });

  test('a reply with a stale nonce is ignored; the reply to the last nonce counts', async () => {
    const dp = open();
    dp.hello('dp-1');
    const first = await dp.next();
    await store.update(withApi('a'));
    const second = await dp.next();
    dp.send({ ack: { version: first.snapshot.version, nonce: first.nonce } });
    dp.send({ ack: { version: 99, nonce: 'not-a-nonce' } });
    dp.send({ nack: { version: second.snapshot.version, nonce: second.nonce, error: 'bad regex in api a' } });
    const status = await until(() => dataPlane('dp-1')?.last_nack && dataPlane('dp-1'));
    expect(status.last_ack).toBeNull();
    expect(status.version).toBeNull();
    expect(counts.ack).toBe(0);
  });

  test('a NACK records version and error and keeps the last ACKed version', async () => {
    const dp = open();
    dp.hello('dp-1');
    const first = await dp.next();
    dp.send({ ack: { version: first.snapshot.version, nonce: first.nonce } });
    await until(() => dataPlane('dp-1')?.last_ack);
    await store.update(withApi('a'));
    const second = await dp.next();
    dp.send({ nack: { version: second.snapshot.version, nonce: second.nonce, error: 'cannot compile' } });
    const status = await until(() => dataPlane('dp-1')?.last_nack && dataPlane('dp-1'));
    expect(status).toMatchObject({
      version: first.snapshot.version,
      last_ack: { version: first.snapshot.version },
      last_nack: { version: second.snapshot.version, error: 'cannot compile', at: t0.toISOString() },
    });
    expect(counts.nack).toBe(1);
  });

  test('unchanged content → no new version and no push', async () => {
    const dp = open();
    dp.hello('dp-1');
    const first = await dp.next();
    const result = await store.update((defs) => ({ ...defs }));
    expect(result.changed).toBe(false);
    await dp.expectNoPush();
    expect(builder.current().version).toBe(first.snapshot.version);
  });

  test('a Hello with the current hash still gets a push (its ACK confirms the state)', async () => {
    const dp = open();
    const { version, hash } = builder.current();
    dp.hello('dp-1', { version, hash });
    expect((await dp.next()).snapshot.hash).toBe(hash);
    expect(await until(() => dataPlane('dp-1'))).toMatchObject({ version, hash });
  });

  test('a closed stream removes the data plane from the list', async () => {
    const dp = open();
    dp.hello('dp-1');
    await dp.next();
    await until(() => dataPlane('dp-1'));
    dp.close();
    await until(() => server.dataPlanes().length === 0);
    expect(counts.disconnect).toBe(1);
  });

  test('close() ends every stream and returns well before its timeout', async () => {
    const dp = open();
    dp.hello('dp-1');
    await dp.next();
    const started = Date.now();
    await server.close(5000);
    expect(Date.now() - started).toBeLessThan(2000);
    await until(() => dp.ended());
  });

  test('a data plane that takes deltas and holds nothing gets the full snapshot on connect, then one delta per version; one that does not, full snapshots', async () => {
    const deltas = open();
    deltas.hello('dp-deltas', { accepts_deltas: true });
    const full = open();
    full.hello('dp-full');
    expect((await deltas.next()).content).toBe('snapshot');
    expect((await full.next()).content).toBe('snapshot');
    await store.update(withApi('a'));
    await store.update(withApi('b'));
    const [d1, d2] = [await deltas.next(), await deltas.next()];
    expect([d1.content, d2.content]).toEqual(['delta', 'delta']);
    expect(d2.delta).toMatchObject({ base_version: 2, version: 3, hash: builder.current().hash, removed_apis: [] });
    expect(d2.delta!.apis.map((a) => a.name)).toEqual(['b']);
    const [f1, f2] = [await full.next(), await full.next()];
    expect([f1.content, f2.content]).toEqual(['snapshot', 'snapshot']);
    expect(f2.snapshot.apis.map((a) => a.name)).toEqual(['a', 'b']);
  });

  test('a data plane that reconnects holding a recent version gets a delta from it; holding the current content, an empty one; holding an unknown version, the full snapshot', async () => {
    await store.update(withApi('a'));
    const held = builder.current();
    await store.update(withApi('b'));
    await store.update(withApi('c'));
    const { version, hash } = builder.current();

    const behind = open();
    behind.hello('dp-behind', { accepts_deltas: true, version: held.version, hash: held.hash });
    const catchUp = await behind.next();
    expect(catchUp).toMatchObject({ content: 'delta', delta: { base_version: held.version, base_hash: held.hash, version, hash, removed_apis: [] } });
    expect(catchUp.delta!.apis.map((a) => a.name)).toEqual(['b', 'c']);
    behind.send({ ack: { version, nonce: catchUp.nonce } });
    expect(await until(() => dataPlane('dp-behind')?.last_ack)).toMatchObject({ version });

    // Its CP's previous run numbered the same content 41.
    const same = open();
    same.hello('dp-same', { accepts_deltas: true, version: 41, hash });
    expect(await same.next()).toMatchObject({ content: 'delta', delta: { base_version: 41, base_hash: hash, version, hash, apis: [], removed_apis: [] } });

    for (const [id, holds] of [
      ['dp-unknown', { version: 41, hash: held.hash }],
      ['dp-empty', {}],
      ['dp-no-deltas', { version: held.version, hash: held.hash, accepts_deltas: false }],
    ] as const) {
      const dp = open();
      dp.hello(id, { accepts_deltas: true, ...holds });
      expect(await dp.next()).toMatchObject({ content: 'snapshot', snapshot: { version, hash } });
    }
  });

  test('a data plane whose stream was full is sent, once it drains, the delta from the last version it was sent, not the whole', async () => {
    // Deltas of ~40 KB each (every API's target changes), so that a stream that is not read fills within a few dozen versions.
    const apis = Array.from({ length: 300 }, (_, i) => `api-${i}`);
    const retarget =
      (port: number) =>
      (defs: Definitions): Definitions => ({
        ...defs,
        apis: apis.map((name) =>
          parseApiDefinition({
            name,
            proxy: { listen_path: `/${name}/*`, upstreams: { balancing: 'roundrobin', targets: [{ target: `http://127.0.0.1:${port}` }] } },
          }),
        ),
      });
    await store.update(retarget(1000));
    // A raw HTTP/2 client that reads nothing until told to: grpc-js's own client keeps reading into its buffers.
    const session = http2.connect(`http://127.0.0.1:${port}`);
    const stream = session.request({
      ':method': 'POST',
      ':path': '/gatehouse.v1.SnapshotService/StreamSnapshots',
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    stream.on('error', () => undefined);
    try {
      stream.pause();
      const hello = proto.service.StreamSnapshots.requestSerialize({ hello: { id: 'dp-slow', accepts_deltas: true } });
      const frame = Buffer.alloc(5 + hello.length);
      frame.writeUInt32BE(hello.length, 1);
      hello.copy(frame, 5);
      stream.write(frame);
      await until(() => dataPlane('dp-slow'));
      // The stream fills after ~18 (16 writes queued in grpc-js, the HTTP/2 window's worth in flight); under 16 more follow.
      for (let v = 1; v <= 30; v++) await store.update(retarget(1000 + v));
      const { version, hash } = builder.current();
      // Every gRPC message framed in what the stream gives once it is read.
      const received: Push[] = [];
      let pending = Buffer.alloc(0);
      stream.on('data', (chunk: Buffer) => {
        pending = Buffer.concat([pending, chunk]);
        while (pending.length >= 5 && pending.length >= 5 + pending.readUInt32BE(1)) {
          const length = pending.readUInt32BE(1);
          received.push(proto.service.StreamSnapshots.responseDeserialize(pending.subarray(5, 5 + length)) as Push);
          pending = pending.subarray(5 + length);
        }
      });
      stream.resume();
      await until(() => received.at(-1)?.delta?.version === version || received.at(-1)?.snapshot?.version === version);
      const versions = received.map((p) => (p.content === 'delta' ? p.delta!.version : p.snapshot.version));
      const gap = versions.findIndex((v, i) => i > 0 && v !== versions[i - 1] + 1);
      // The stream filled (some versions were never sent) and what came after the gap is a delta from the last one sent.
      expect(gap).toBeGreaterThan(0);
      expect(received[0].content).toBe('snapshot');
      expect(received.slice(1).map((p) => p.content)).toEqual(received.slice(1).map(() => 'delta'));
      expect(received[gap].delta).toMatchObject({ base_version: versions[gap - 1], version, hash });
    } finally {
      stream.close();
      session.close();
    }
  });

  test('a NACKed delta is followed at once by the full snapshot; a NACKed full snapshot is not resent, and the next version goes full', async () => {
    const dp = open();
    dp.hello('dp-nack', { accepts_deltas: true });
    const first = await dp.next();
    dp.send({ ack: { version: first.snapshot.version, nonce: first.nonce } });
    await store.update(withApi('a'));
    const delta = await dp.next();
    expect(delta.content).toBe('delta');
    dp.send({ nack: { version: delta.delta!.version, nonce: delta.nonce, error: 'delta base is version 0' } });
    const resent = await dp.next();
    expect(resent).toMatchObject({ content: 'snapshot', snapshot: { version: 2, hash: builder.current().hash } });
    dp.send({ nack: { version: 2, nonce: resent.nonce, error: 'cannot build' } });
    await dp.expectNoPush();
    await store.update(withApi('b'));
    expect(await dp.next()).toMatchObject({ content: 'snapshot', snapshot: { version: 3 } });
  });
});
