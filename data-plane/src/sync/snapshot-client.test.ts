/**
 * The snapshot client against a real in-process gRPC server speaking the wire contract: Hello,
 * ACK/NACK echoing nonces, reconnect after the stream ends, cache written after an apply.
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { parseApiDefinition, type ApiDefinition } from '#proto/definition/index';
import { CHANNEL_OPTIONS, loadGatehouseProto } from '#proto/grpc';
import { createLogger } from '#proto/logger';
import type * as wire from '#proto/wire';
import { definitionsHash, toDeltaMessage, toSnapshotMessage, type DeltaMessage, type SnapshotMessage } from '#proto/snapshot/codec';
import { createMemoryTokenStore } from '../auth/index.js';
import { createSnapshotCache, messageJsonPieces } from './snapshot-cache.js';
import { createSnapshotClient, type SnapshotClient } from './snapshot-client.js';
import { APPLY_TURN, LARGE_DELTA, createSnapshotHolder } from './snapshot-holder.js';
import { createTableBuilder } from '../table/index.js';

const proto = loadGatehouseProto();
const logger = createLogger('data-plane', 'silent');

type Stream = grpc.ServerDuplexStream<wire.DataPlaneMessage, Buffer>;

function apiDef(name: string): ApiDefinition {
  return parseApiDefinition({
    name,
    proxy: { listen_path: `/${name}/*`, upstreams: { balancing: 'roundrobin', targets: [{ target: 'http://127.0.0.1:9000' }] } },
  });
}

function snapshot(version: number, ...apis: ApiDefinition[]): SnapshotMessage {
  return toSnapshotMessage(version, { apis, oauthServers: [] });
}

/** A control plane reduced to the wire: records every message, lets the test push and hang up. */
async function startFakeControlPlane() {
  const messages: wire.DataPlaneMessage[] = [];
  const streams: Stream[] = [];
  const server = new grpc.Server(CHANNEL_OPTIONS);
  server.addService(proto.service, {
    StreamSnapshots: (call: Stream) => {
      streams.push(call);
      call.on('data', (m: wire.DataPlaneMessage) => messages.push(m));
      call.on('error', () => undefined);
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  return {
    address: `127.0.0.1:${port}`,
    messages,
    streams,
    push(stream: Stream, nonce: string, message: SnapshotMessage) {
      stream.write(proto.wrapPush(nonce, proto.encodeSnapshot(message)));
    },
    pushDelta(stream: Stream, nonce: string, delta: DeltaMessage) {
      stream.write(proto.wrapPush(nonce, proto.encodeDelta(delta), 'delta'));
    },
    close: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())).then(() => server.forceShutdown()),
  };
}

async function until<T>(what: string, probe: () => T | undefined, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

let cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const fn of cleanup.reverse()) await fn();
  cleanup = [];
});

function startClient(address: string, options: { cachePath?: string; coldStart?: { waitMs: number; fallback(): void } } = {}) {
  const holder = createSnapshotHolder({ tables: createTableBuilder({ tokenStore: createMemoryTokenStore() }) });
  const client: SnapshotClient = createSnapshotClient({
    proto,
    address,
    credentials: grpc.credentials.createInsecure(),
    holder,
    identity: { id: 'dp-test', hostname: 'host.test', proxyAddress: '127.0.0.1:8080', softwareVersion: '0.0.0-test' },
    backoff: { baseMs: 20, maxMs: 100 },
    logger,
    cache: options.cachePath ? createSnapshotCache(options.cachePath) : undefined,
    coldStart: options.coldStart,
  });
  client.start();
  cleanup.push(() => client.close());
  return { holder, client };
}

describe('snapshot client', () => {
  test('Hello, then ACK with the nonce for a good push and NACK for a bad one (old snapshot kept)', async () => {
    const cp = await startFakeControlPlane();
    cleanup.push(cp.close);
    const { holder, client } = startClient(cp.address);

    const hello = await until('hello', () => cp.messages.find((m) => m.hello)?.hello);
    expect(hello).toMatchObject({ id: 'dp-test', version: 0, hash: '', proxy_address: '127.0.0.1:8080' });

    const first = snapshot(1, apiDef('a'));
    cp.push(cp.streams[0]!, 'n1', first);
    const ack = await until('ack', () => cp.messages.find((m) => m.ack)?.ack);
    expect(ack).toEqual({ version: 1, nonce: 'n1' });
    expect(holder.current()).toMatchObject({ version: 1, hash: first.hash });
    expect(client.connected).toBe(true);

    const bad = snapshot(2, { ...apiDef('bad'), proxy: { ...apiDef('bad').proxy, listen_path: '/x/{id:[}' } });
    cp.push(cp.streams[0]!, 'n2', bad);
    const nack = await until('nack', () => cp.messages.find((m) => m.nack)?.nack);
    expect(nack).toMatchObject({ version: 2, nonce: 'n2' });
    expect(nack.error.length).toBeGreaterThan(0);
    expect(holder.current()).toMatchObject({ version: 1, hash: first.hash });
  });

  test('deltas: applied on top of the held version; one with a wrong hash or another base is NACKed and the old snapshot keeps serving', async () => {
    const cp = await startFakeControlPlane();
    cleanup.push(cp.close);
    const { holder } = startClient(cp.address);
    const hello = await until('hello', () => cp.messages.find((m) => m.hello)?.hello);
    expect(hello).toMatchObject({ accepts_deltas: true });
    const content = (version: number, ...apis: ApiDefinition[]) => {
      const defs = { apis, oauthServers: [] };
      return { version, hash: definitionsHash(defs), defs };
    };
    const [a, b] = [apiDef('a'), apiDef('b')];
    const v1 = content(1, a);
    const v2 = content(2, a, b);
    cp.push(cp.streams[0]!, 'n1', toSnapshotMessage(1, v1.defs));
    await until('ack of the full snapshot', () => cp.messages.find((m) => m.ack?.nonce === 'n1'));
    const served = holder.current()!;

    cp.pushDelta(cp.streams[0]!, 'n2', { ...toDeltaMessage(v1, v2), hash: 'f'.repeat(64) });
    const badHash = await until('nack of the bad hash', () => cp.messages.find((m) => m.nack?.nonce === 'n2')?.nack);
    expect(badHash).toMatchObject({ version: 2 });
    expect(badHash.error).toMatch(/hash mismatch after delta 1 → 2/);
    expect(holder.current()).toBe(served);

    cp.pushDelta(cp.streams[0]!, 'n3', toDeltaMessage({ ...v1, version: 7 }, { ...v2, version: 8 }));
    const otherBase = await until('nack of the other base', () => cp.messages.find((m) => m.nack?.nonce === 'n3')?.nack);
    expect(otherBase.error).toMatch(/delta base is version 7/);
    expect(holder.current()).toBe(served);
    expect(holder.current()!.routing.match({ method: 'GET', host: 'x.test', path: '/b/1' })).toBeNull();

    cp.pushDelta(cp.streams[0]!, 'n4', toDeltaMessage(v1, v2));
    expect(await until('ack of the delta', () => cp.messages.find((m) => m.ack?.nonce === 'n4')?.ack)).toEqual({ version: 2, nonce: 'n4' });
    expect(holder.current()).toMatchObject({ version: 2, hash: v2.hash });
    expect(holder.current()!.routing.match({ method: 'GET', host: 'x.test', path: '/b/1' })?.route.name).toBe('b');
    // The unchanged route keeps its forwarding state (balancer position, pipeline).
    const upstreamOfA = (snapshot: typeof served) => snapshot.upstreams.get(snapshot.routing.match({ method: 'GET', host: 'x.test', path: '/a/1' })!.route);
    expect(upstreamOfA(holder.current()!)).toBe(upstreamOfA(served));
  });

  test('a full snapshot or a large delta to a serving data plane is applied in turns; a delta pushed right behind it waits for it, and the answers keep their order', async () => {
    const cp = await startFakeControlPlane();
    cleanup.push(cp.close);
    const { holder } = startClient(cp.address);
    await until('hello', () => cp.messages.find((m) => m.hello));
    cp.push(cp.streams[0]!, 'n1', snapshot(1, apiDef('a')));
    await until('ack of the first snapshot', () => cp.messages.find((m) => m.ack?.nonce === 'n1'));
    const served = holder.current()!;
    const defs = { apis: Array.from({ length: APPLY_TURN * 3 }, (_, i) => apiDef(`api-${i}`)), oauthServers: [] };
    const v2 = { version: 2, hash: definitionsHash(defs), defs };
    const v3defs = { ...defs, apis: [...defs.apis, apiDef('late')] };
    const v3 = { version: 3, hash: definitionsHash(v3defs), defs: v3defs };
    const applyInTurns = holder.applyInTurns;
    let inTurns = 0;
    holder.applyInTurns = (...args) => {
      inTurns++;
      return applyInTurns(...args);
    };
    cp.push(cp.streams[0]!, 'n2', toSnapshotMessage(2, defs));
    cp.pushDelta(cp.streams[0]!, 'n3', toDeltaMessage(v2, v3));
    await until('ack of the delta', () => cp.messages.find((m) => m.ack?.nonce === 'n3'));
    expect(cp.messages.flatMap((m): object[] => (m.ack ? [m.ack] : m.nack ? [{ nack: m.nack.nonce }] : []))).toEqual([
      { version: 1, nonce: 'n1' },
      { version: 2, nonce: 'n2' },
      { version: 3, nonce: 'n3' },
    ]);
    expect(inTurns).toBe(1);
    expect(holder.current()).not.toBe(served);
    expect(holder.current()).toMatchObject({ version: 3, hash: v3.hash });
    expect(holder.current()!.routing.match({ method: 'GET', host: 'x.test', path: '/late/1' })?.route.name).toBe('late');

    // A delta of LARGE_DELTA definitions is applied in turns too; a small one right behind it waits for it.
    const applyDeltaInTurns = holder.applyDeltaInTurns;
    let deltasInTurns = 0;
    holder.applyDeltaInTurns = (...args) => {
      deltasInTurns++;
      return applyDeltaInTurns(...args);
    };
    const v4defs = { ...v3defs, apis: [...v3defs.apis, ...Array.from({ length: LARGE_DELTA }, (_, i) => apiDef(`bulk-${i}`))] };
    const v4 = { version: 4, hash: definitionsHash(v4defs), defs: v4defs };
    const v5defs = { ...v4defs, apis: v4defs.apis.filter((a) => a.name !== 'late') };
    const v5 = { version: 5, hash: definitionsHash(v5defs), defs: v5defs };
    cp.pushDelta(cp.streams[0]!, 'n4', toDeltaMessage(v3, v4));
    cp.pushDelta(cp.streams[0]!, 'n5', toDeltaMessage(v4, v5));
    await until('ack of the small delta', () => cp.messages.find((m) => m.ack?.nonce === 'n5'));
    expect(cp.messages.flatMap((m): object[] => (m.ack ? [m.ack] : m.nack ? [{ nack: m.nack.nonce }] : [])).slice(3)).toEqual([
      { version: 4, nonce: 'n4' },
      { version: 5, nonce: 'n5' },
    ]);
    expect(deltasInTurns).toBe(1);
    expect(holder.current()).toMatchObject({ version: 5, hash: v5.hash });
    expect(holder.current()!.routing.match({ method: 'GET', host: 'x.test', path: '/bulk-7/1' })?.route.name).toBe('bulk-7');
    expect(holder.current()!.routing.match({ method: 'GET', host: 'x.test', path: '/late/1' })).toBeNull();
  });

  test('after the stream ends it keeps serving, reconnects and says what it holds', async () => {
    const cp = await startFakeControlPlane();
    cleanup.push(cp.close);
    const { holder } = startClient(cp.address);
    await until('first stream', () => cp.streams[0]);
    const first = snapshot(5, apiDef('a'));
    cp.push(cp.streams[0]!, 'n1', first);
    await until('ack', () => cp.messages.find((m) => m.ack));

    cp.streams[0]!.end(); // the CP hangs up (restart, rollout)
    const second = await until('second hello', () => cp.messages.filter((m) => m.hello)[1]?.hello);
    expect(second).toMatchObject({ version: 5, hash: first.hash });
    expect(holder.current()?.version).toBe(5);
  });

  test('a data plane with no reachable control plane keeps retrying and connects once one appears', async () => {
    // Reserve a port, free it, and only later start the CP there.
    const probe = await startFakeControlPlane();
    const address = probe.address;
    await probe.close();
    const { holder } = startClient(address);
    await new Promise((r) => setTimeout(r, 150)); // a few failed attempts
    expect(holder.current()).toBeNull();

    const port = Number(address.split(':')[1]);
    const server = new grpc.Server(CHANNEL_OPTIONS);
    const hellos: wire.DataPlaneMessage[] = [];
    server.addService(proto.service, {
      StreamSnapshots: (call: Stream) => {
        call.on('data', (m: wire.DataPlaneMessage) => {
          hellos.push(m);
          if (m.hello) call.write(proto.wrapPush('n1', proto.encodeSnapshot(snapshot(1, apiDef('late')))));
        });
        call.on('error', () => undefined);
      },
    });
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())),
    );
    cleanup.push(() => server.forceShutdown());
    await until('snapshot from the late CP', () => holder.current() ?? undefined);
    expect(holder.current()?.routing.match({ method: 'GET', host: 'x', path: '/late/1' })?.route.name).toBe('late');
  });

  describe('cold-start fallback (SNAPSHOT_CACHE served only while no CP answers)', () => {
    const counting = (waitMs: number) => {
      const calls = { n: 0 };
      return { calls, coldStart: { waitMs, fallback: () => void calls.n++ } };
    };

    test('no CP listening: called once, at the first failed attempt, not at every retry', async () => {
      const probe = await startFakeControlPlane();
      await probe.close();
      const { calls, coldStart } = counting(60_000);
      startClient(probe.address, { coldStart });
      await until('the fallback', () => (calls.n > 0 ? true : undefined));
      await new Promise((r) => setTimeout(r, 300)); // several more failed attempts (backoff 20-100 ms)
      expect(calls.n).toBe(1);
    });

    test('a CP that accepts the stream but sends nothing: called once the wait is over', async () => {
      const cp = await startFakeControlPlane();
      cleanup.push(cp.close);
      const { calls, coldStart } = counting(200);
      startClient(cp.address, { coldStart });
      await until('the stream', () => cp.streams[0]);
      expect(calls.n).toBe(0);
      await until('the fallback', () => (calls.n > 0 ? true : undefined));
      expect(calls.n).toBe(1);
    });

    test('a CP that pushes first: never called, not even after the wait or when the stream later drops', async () => {
      const cp = await startFakeControlPlane();
      cleanup.push(cp.close);
      const { calls, coldStart } = counting(200);
      const { holder } = startClient(cp.address, { coldStart });
      const stream = await until('the stream', () => cp.streams[0]);
      cp.push(stream, 'n1', snapshot(1, apiDef('fresh')));
      await until('the push applied', () => holder.current() ?? undefined);
      stream.end();
      await new Promise((r) => setTimeout(r, 400));
      expect(calls.n).toBe(0);
    });
  });

  test('SNAPSHOT_CACHE: an applied snapshot is written atomically (0600) and serves a cold start', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-cache-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const cachePath = join(dir, 'snapshot.json');
    const cp = await startFakeControlPlane();
    cleanup.push(cp.close);
    startClient(cp.address, { cachePath });
    await until('stream', () => cp.streams[0]);
    const message = snapshot(9, apiDef('cached'));
    cp.push(cp.streams[0]!, 'n1', message);
    await until('cache file', () => {
      try {
        return JSON.parse(readFileSync(cachePath, 'utf8')) as SnapshotMessage;
      } catch {
        return undefined;
      }
    });
    expect(statSync(cachePath).mode & 0o777).toBe(0o600);

    // Cold start of another data plane with no control plane at all.
    const holder = createSnapshotHolder({ tables: createTableBuilder({ tokenStore: createMemoryTokenStore() }) });
    const cached = createSnapshotCache(cachePath).load();
    expect(holder.apply(cached!)).toMatchObject({ ok: true, version: 9, hash: message.hash });
    expect(holder.current()?.routing.match({ method: 'GET', host: 'x', path: '/cached/a' })?.route.name).toBe('cached');
  });

  test('flush() waits for the saves in progress (shutdown right after an apply keeps the file)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-cache-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const cache = createSnapshotCache(join(dir, 'snapshot.json'));
    void cache.save(snapshot(1, apiDef('one')));
    void cache.save(snapshot(2, apiDef('two')));
    await cache.flush();
    expect(cache.load()).toMatchObject({ version: 2 });
  });

  test('saves within the minimum interval coalesce into one write of the newest, which flush() makes at once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-cache-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const cache = createSnapshotCache(join(dir, 'snapshot.json'), { minIntervalMs: 600_000 });
    await cache.save(snapshot(1, apiDef('one')));
    expect(cache.load()).toMatchObject({ version: 1 });
    const built: number[] = [];
    const later = [2, 3].map((version) =>
      cache.save(() => {
        built.push(version);
        return snapshot(version, apiDef(`v${version}`));
      }),
    );
    // Within the interval nothing more is built or written (a write takes a few ms): the file still holds version 1.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(cache.load()).toMatchObject({ version: 1 });
    await cache.flush();
    await Promise.all(later);
    expect(built).toEqual([3]);
    expect(cache.load()).toMatchObject({ version: 3 });
  });

  test.each([
    ['1,200 APIs (several pieces), a short list, an empty one', 1_200, [{ username: 'u', password_hash: 'h' }]],
    ['a list of exactly one piece', 100, []],
    ['no APIs', 0, []],
  ])('the cache file text is JSON.stringify of the message, written in pieces: %s', async (_name, apis, credentials) => {
    const base = snapshot(7, ...Array.from({ length: apis }, (_, i) => apiDef(`api-${i}`)));
    const message = { ...base, basic_auth_credentials: credentials, decodeDefinition: () => null };
    const { decodeDefinition, ...plain } = message;
    expect(typeof decodeDefinition).toBe('function');
    const pieces: string[] = [];
    for await (const piece of messageJsonPieces(message)) pieces.push(piece);
    expect(pieces.join('')).toBe(JSON.stringify(plain));
    if (apis > 100) expect(pieces.length).toBeGreaterThan(apis / 100);
  });

  test('a missing cache file loads as null', () => {
    expect(createSnapshotCache(join(tmpdir(), 'gatehouse-no-such-dir', 'snapshot.json')).load()).toBeNull();
  });
});
