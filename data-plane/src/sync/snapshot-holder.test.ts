import { parseApiDefinition, type ApiDefinition } from '#proto/definition/index';
import { readFile } from 'node:fs/promises';
import { definitionsHash, snapshotContent, toDeltaMessage, toSnapshotMessage, type SnapshotMessage } from '#proto/snapshot/codec';
import type { Definitions } from '#proto/definition/types';
import { Registry } from 'prom-client';
import { createMemoryTokenStore } from '../auth/index.js';
import { APPLY_TURN, createSnapshotHolder } from './snapshot-holder.js';
import { createTableBuilder, type ServingTable } from '../table/index.js';
import { createNamedCertificates } from '../../../test/helpers/test-certificates.js';

function apiDef(name: string, listenPath = `/${name}/*`): ApiDefinition {
  return parseApiDefinition({
    name,
    proxy: { listen_path: listenPath, upstreams: { balancing: 'roundrobin', targets: [{ target: 'http://127.0.0.1:9000' }] } },
  });
}

function snapshot(version: number, ...apis: ApiDefinition[]): SnapshotMessage {
  return toSnapshotMessage(version, { apis, oauthServers: [] });
}

const lookup = { method: 'GET', host: 'any.test' };

/** The forwarding state of the route `snapshot` matches for GET `path`. */
const upstreamAt = (snapshot: ServingTable, path: string) => snapshot.upstreams.get(snapshot.routing.match({ ...lookup, path })!.route);

const newHolder = () => createSnapshotHolder({ tables: createTableBuilder({ tokenStore: createMemoryTokenStore() }) });

describe('snapshot holder', () => {
  test('nothing is applied at first', () => {
    expect(newHolder().current()).toBeNull();
  });

  test('a valid snapshot is applied whole: routes, upstream state, version and hash', () => {
    const holder = newHolder();
    const message = snapshot(3, apiDef('a'), apiDef('b'));
    expect(holder.apply(message)).toEqual({ ok: true, version: 3, hash: message.hash, changed: true });
    const current = holder.current()!;
    expect(current.version).toBe(3);
    expect(current.hash).toBe(message.hash);
    expect(current.routing.match({ ...lookup, path: '/b/x' })?.route.name).toBe('b');
    expect(upstreamAt(current, '/a/x')).toMatchObject({ dialTimeoutMs: 30_000, headersTimeoutMs: 60_000, insecureSkipVerify: false, pipeline: null });
  });

  const good = snapshot(1, apiDef('a'));
  const badRegex = snapshot(2, { ...apiDef('bad'), proxy: { ...apiDef('bad').proxy, listen_path: '/x/{id:[}' } });
  const notDefinitions: SnapshotMessage = { ...snapshot(2, apiDef('b')), apis: [{ name: 42 }] };
  const badTimeout = snapshot(2, {
    ...apiDef('slow'),
    proxy: { ...apiDef('slow').proxy, forwarding_timeouts: { dial_timeout: 'forever', response_header_timeout: '1s' } },
  });

  test.each([
    ['a listen_path regex that does not compile', badRegex],
    ['a message that does not describe definitions', notDefinitions],
    ['an unparsable forwarding timeout', badTimeout],
    ['no message at all', null as unknown as SnapshotMessage],
  ])('%s is rejected with its error and the previous snapshot keeps serving', (_name, bad) => {
    const holder = newHolder();
    holder.apply(good);
    const before = holder.current();
    const result = holder.apply(bad);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error.length).toBeGreaterThan(0);
    expect(holder.current()).toBe(before);
    expect(holder.current()!.routing.match({ ...lookup, path: '/a/1' })?.route.name).toBe('a');
  });

  test("Gateway HTTPS listeners: a snapshot whose certificate does not parse is rejected, the held certificates keep serving; a delta's new ones are swapped in with it", async () => {
    const certs = await createNamedCertificates(['a.example.org']);
    const other = await createNamedCertificates(['a.example.org']);
    try {
      const pair = async (set: typeof certs) => ({
        certificate_chain: await readFile(set.serverCert, 'utf8'),
        private_key: await readFile(set.serverKey, 'utf8'),
      });
      const listener = (certificate: { certificate_chain: string; private_key: string }) => [
        { name: 'ns/gw/https', hostname: 'a.example.org', port: 443, certificates: [certificate] },
      ];
      const defs: Definitions = { apis: [apiDef('a')], oauthServers: [] };
      const first = snapshotContent(1, defs, definitionsHash(defs), undefined, listener(await pair(certs)));
      const holder = newHolder();
      expect(holder.apply(toSnapshotMessage(1, defs, undefined, undefined, first.gatewayTls))).toMatchObject({ ok: true });
      const served = holder.current()!.gatewayTls!.forServername('a.example.org');
      expect(served).toBeDefined();
      const broken = listener({ ...(await pair(certs)), private_key: '-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n' });
      for (const bad of [
        holder.apply(toSnapshotMessage(2, defs, undefined, undefined, broken)),
        holder.applyDelta(toDeltaMessage(first, snapshotContent(2, defs, definitionsHash(defs), undefined, broken))),
      ]) {
        expect(bad).toMatchObject({ ok: false, error: expect.stringMatching(/^gateway listener ns\/gw\/https: /) });
        expect(holder.current()!.gatewayTls!.forServername('a.example.org')).toBe(served);
      }
      // A rotated certificate comes by delta: a new context for the name, swapped with the table.
      const rotated = snapshotContent(2, defs, definitionsHash(defs), undefined, listener(await pair(other)));
      expect(holder.applyDelta(toDeltaMessage(first, rotated))).toMatchObject({ ok: true, version: 2, hash: rotated.hash });
      const now = holder.current()!.gatewayTls!.forServername('a.example.org');
      expect(now).toBeDefined();
      expect(now).not.toBe(served);
      expect(holder.content()!.gatewayTls).toEqual(rotated.gatewayTls);
    } finally {
      await certs.dispose();
      await other.dispose();
    }
  });

  test('a push (full or an empty delta) with the hash already held is acknowledged without rebuilding', () => {
    const holder = newHolder();
    holder.apply(good);
    const before = holder.current()!;
    expect(holder.apply({ ...good })).toEqual({ ok: true, version: 1, hash: good.hash, changed: false });
    expect(holder.current()).toBe(before);
    // Same content under a new version (the CP's numbering is authoritative): same table, new version.
    expect(holder.apply({ ...good, version: 7 })).toMatchObject({ ok: true, version: 7, changed: false });
    expect(holder.current()!.version).toBe(7);
    expect(holder.current()!.routing).toBe(before.routing);
    // The CP's empty delta from the held version to the same content under its own (a Hello after its restart).
    const held = { version: 7, hash: good.hash, defs: { apis: [apiDef('a')], oauthServers: [] } };
    expect(holder.applyDelta(toDeltaMessage(held, { ...held, version: 9 }))).toEqual({ ok: true, version: 9, hash: good.hash, changed: false });
    expect(holder.current()!.routing).toBe(before.routing);
    // An empty delta from a version not held is refused as any delta is.
    expect(holder.applyDelta(toDeltaMessage({ ...held, version: 8 }, { ...held, version: 10 }))).toMatchObject({ ok: false, version: 10 });
    expect(holder.current()!.version).toBe(9);
  });

  test('a full snapshot applied in turns serves the old one until it swaps, lets other work run between turns, and routes as one applied at once', async () => {
    const many = (version: number, moved: string) =>
      snapshot(version, ...Array.from({ length: APPLY_TURN * 3 }, (_, i) => apiDef(`api-${i}`, i === 7 ? `/${moved}/*` : `/api-${i}/*`)));
    const holder = newHolder();
    holder.apply(many(1, 'first'));
    const before = holder.current()!;
    let turns = 0;
    let servedOld = true;
    const ticker = setInterval(() => {
      turns++;
      servedOld &&= holder.current() === before;
    }, 0);
    const applying = holder.applyInTurns(many(2, 'second'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(holder.current()).toBe(before);
    const result = await applying;
    clearInterval(ticker);
    expect(result).toEqual({ ok: true, version: 2, hash: many(2, 'second').hash, changed: true });
    // Timers ran while it applied (at least one per turn of decoding and one of indexing), all on the old snapshot.
    expect(turns).toBeGreaterThanOrEqual(2);
    expect(servedOld).toBe(true);
    const atOnce = newHolder();
    atOnce.apply(many(2, 'second'));
    const names = (h: typeof holder) =>
      ['/second/x', '/first/x', '/api-8/x', '/none/x'].map((path) => h.current()!.routing.match({ ...lookup, path })?.route.name ?? null);
    expect(names(holder)).toEqual(['api-7', null, 'api-8', null]);
    expect(names(holder)).toEqual(names(atOnce));
    // A delta then applies on top of it as on any full snapshot.
    const content = holder.content()!;
    const next = { version: 3, defs: { ...content.defs, apis: content.defs.apis.filter((a) => a.name !== 'api-8') } };
    expect(holder.applyDelta(toDeltaMessage(content, { ...next, hash: definitionsHash(next.defs) }))).toMatchObject({ ok: true, version: 3 });
    expect(names(holder)).toEqual(['api-7', null, null, null]);
  });

  test('a large delta applied in turns routes as the same delta applied at once; a wrong base or hash is refused and the old snapshot kept', async () => {
    const content = (version: number, apis: ApiDefinition[]) => {
      const defs: Definitions = { apis, oauthServers: [] };
      return { version, hash: definitionsHash(defs), defs };
    };
    const base = content(
      1,
      Array.from({ length: APPLY_TURN * 3 }, (_, i) => apiDef(`api-${i}`)),
    );
    // Every other API moved, one removed, one added.
    const next = content(2, [...base.defs.apis.slice(1).map((a, i) => (i % 2 === 0 ? apiDef(a.name, `/moved/${a.name}/*`) : a)), apiDef('added')]);
    const delta = toDeltaMessage(base, next);
    const [inTurns, atOnce] = [newHolder(), newHolder()];
    for (const holder of [inTurns, atOnce]) holder.apply(toSnapshotMessage(1, base.defs));
    const before = inTurns.current()!;
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 0);
    expect(await inTurns.applyDeltaInTurns({ ...delta, hash: 'f'.repeat(64) })).toMatchObject({ ok: false, version: 2 });
    expect(await inTurns.applyDeltaInTurns({ ...delta, base_version: 7 })).toMatchObject({ ok: false, version: 2 });
    expect(inTurns.current()).toBe(before);
    const result = await inTurns.applyDeltaInTurns(delta);
    clearInterval(ticker);
    expect(result).toEqual(atOnce.applyDelta(delta));
    expect(result).toEqual({ ok: true, version: 2, hash: next.hash, changed: true });
    expect(ticks).toBeGreaterThanOrEqual(2);
    const names = (h: typeof inTurns) =>
      ['/moved/api-1/x', '/api-1/x', '/api-2/x', '/api-0/x', '/added/x'].map((path) => h.current()!.routing.match({ ...lookup, path })?.route.name ?? null);
    expect(names(inTurns)).toEqual(['api-1', null, 'api-2', null, 'added']);
    expect(names(inTurns)).toEqual(names(atOnce));
    expect(inTurns.content()).toMatchObject({ version: 2, hash: next.hash });
  });

  test('a large delta applied in turns keeps what was built for the definitions it leaves alone: their upstreams and, with no server changed, the authorizer', async () => {
    const withCors = (name: string) => parseApiDefinition({ ...apiDef(name), plugins: [{ name: 'cors' }] });
    const base = {
      apis: [withCors('kept-cors'), apiDef('kept-plain'), ...Array.from({ length: APPLY_TURN * 3 }, (_, i) => apiDef(`api-${i}`))],
      oauthServers: [],
    };
    const next = {
      apis: [withCors('kept-cors'), apiDef('kept-plain'), ...base.apis.slice(2).map((a) => apiDef(a.name, `/moved/${a.name}/*`))],
      oauthServers: [],
    };
    const delta = toDeltaMessage({ version: 1, hash: definitionsHash(base), defs: base }, { version: 2, hash: definitionsHash(next), defs: next });
    const holder = newHolder();
    holder.apply(toSnapshotMessage(1, base));
    const before = holder.current()!;
    const [cors, plain, changed] = ['/kept-cors/x', '/kept-plain/x', '/api-0/x'].map((path) => upstreamAt(before, path));
    expect(await holder.applyDeltaInTurns(delta)).toEqual({ ok: true, version: 2, hash: delta.hash, changed: true });
    const after = holder.current()!;
    expect(upstreamAt(after, '/kept-cors/x')).toBe(cors);
    expect(upstreamAt(after, '/kept-plain/x')).toBe(plain);
    expect(upstreamAt(after, '/moved/api-0/x')).not.toBe(changed);
    expect(after.routing.match({ ...lookup, path: '/api-0/x' })).toBeNull();
    expect(after.authorizer).toBe(before.authorizer);
    // What a later small delta builds on is the large one's result.
    const last = { ...next, apis: next.apis.filter((a) => a.name !== 'kept-plain') };
    expect(
      holder.applyDelta(toDeltaMessage({ version: 2, hash: definitionsHash(next), defs: next }, { version: 3, hash: definitionsHash(last), defs: last })),
    ).toMatchObject({ ok: true, version: 3 });
    expect(holder.current()!.routing.match({ ...lookup, path: '/kept-plain/x' })).toBeNull();
    expect(upstreamAt(holder.current()!, '/kept-cors/x')).toBe(cors);
  });

  test('a full snapshot applied in turns: a bad one is refused and the old one kept; one no longer wanted is dropped unapplied', async () => {
    const holder = newHolder();
    holder.apply(good);
    const before = holder.current()!;
    const lying = { ...snapshot(2, apiDef('x'), apiDef('y')), hash: good.hash.replace(/^./, (c) => (c === '0' ? '1' : '0')) };
    const refused = await holder.applyInTurns(lying);
    expect(refused).toMatchObject({ ok: false, version: 2 });
    expect(refused?.ok === false && refused.error).toMatch(/hash mismatch/);
    expect(holder.current()).toBe(before);
    const big = snapshot(3, ...Array.from({ length: APPLY_TURN * 2 }, (_, i) => apiDef(`n-${i}`)));
    let wanted = true;
    const dropped = holder.applyInTurns(big, () => wanted);
    wanted = false;
    expect(await dropped).toBeNull();
    expect(holder.current()).toBe(before);
    // The same content as held: acknowledged without a rebuild, as apply() does.
    expect(await holder.applyInTurns({ ...good, version: 4 })).toEqual({ ok: true, version: 4, hash: good.hash, changed: false });
    expect(holder.current()!.routing).toBe(before.routing);
  });

  test('requests holding the old snapshot keep it after a swap', () => {
    const holder = newHolder();
    holder.apply(good);
    const inFlight = holder.current()!;
    holder.apply(snapshot(2, apiDef('other')));
    expect(inFlight.routing.match({ ...lookup, path: '/a/1' })?.route.name).toBe('a');
    expect(holder.current()!.routing.match({ ...lookup, path: '/a/1' })).toBeNull();
  });

  test('metrics show the applied version and each result', async () => {
    const registry = new Registry();
    const holder = createSnapshotHolder({ tables: createTableBuilder({ tokenStore: createMemoryTokenStore(), registry }), registry });
    holder.apply(snapshot(4, apiDef('a')));
    holder.apply(snapshot(4, apiDef('a')));
    holder.apply(badRegex);
    const text = await registry.metrics();
    expect(text).toContain('gatehouse_snapshot_version 4');
    expect(text).toContain('gatehouse_snapshot_routes 1');
    expect(text).toContain('gatehouse_snapshot_applies_total{result="applied"} 1');
    expect(text).toContain('gatehouse_snapshot_applies_total{result="unchanged"} 1');
    expect(text).toContain('gatehouse_snapshot_applies_total{result="rejected"} 1');
  });
});
