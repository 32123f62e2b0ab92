import { parseApiDefinition, type ApiDefinition } from '#proto/definition/index';
import { definitionsHash, toDeltaMessage, toSnapshotMessage, type SnapshotMessage } from '#proto/snapshot/codec';
import type { Definitions } from '#proto/definition/types';
import { Registry } from 'prom-client';
import { createMemoryTokenStore } from '../auth/index.js';
import { GatehouseError } from '#proto/errors';
import { hashApiKey, importHashKey, legacyHashApiKey } from '#proto/api-key';
import { createHealthRegistry } from '../health/index.js';
import { PluginExchange } from '../plugins/index.js';
import { APPLY_TURN, createSnapshotHolder, type AppliedSnapshot } from './snapshot-holder.js';
import { compilePlugins, type CompiledOpenidConnect } from '#proto/plugins/index';
import { startOidcProvider } from '../../../test/helpers/oidc-provider.js';
import { createJwksCache } from '../auth/jwks-cache.js';
import { createOidcProviders } from '../auth/oidc-provider.js';
import { createUpstreamPools } from '../proxy/upstream-pools.js';
import { collectGarbage } from '../../../test/helpers/collect-garbage.js';

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
const upstreamAt = (snapshot: AppliedSnapshot, path: string) => snapshot.upstreams.get(snapshot.table.match({ ...lookup, path })!.route);

/** Who the '/keyed/x' route's request hooks say the API key belongs to (the upstream's X-Consumer-Username), or the refusal's code. */
function keyOwner(holder: ReturnType<typeof createSnapshotHolder>, key: string): string {
  const pipeline = upstreamAt(holder.current()!, '/keyed/x')!.pipeline!;
  const req = { rawHeaders: ['apikey', key], headers: { apikey: key } };
  const exchange = {
    req,
    headers: req.rawHeaders,
    query: '',
    consumer: null,
    addClientHeader: () => undefined,
    authenticate: PluginExchange.prototype.authenticate,
  } as unknown as PluginExchange;
  try {
    for (const hook of pipeline.request) hook(exchange);
  } catch (err) {
    return (err as GatehouseError).code;
  }
  return exchange.consumer!;
}

describe('snapshot holder', () => {
  test('nothing is applied at first', () => {
    expect(createSnapshotHolder({ tokenStore: createMemoryTokenStore() }).current()).toBeNull();
  });

  test('a valid snapshot is applied whole: routes, upstream state, version and hash', () => {
    const holder = createSnapshotHolder({ tokenStore: createMemoryTokenStore() });
    const message = snapshot(3, apiDef('a'), apiDef('b'));
    expect(holder.apply(message)).toEqual({ ok: true, version: 3, hash: message.hash, changed: true });
    const current = holder.current()!;
    expect(current.version).toBe(3);
    expect(current.hash).toBe(message.hash);
    expect(current.table.match({ ...lookup, path: '/b/x' })?.route.name).toBe('b');
    expect(upstreamAt(current, '/a/x')).toMatchObject({ dialTimeoutMs: 30_000, headersTimeoutMs: 60_000, insecureSkipVerify: false, pipeline: null });
  });

  test("a plain route's forwarding state is made at its first request and kept; a route with plugins has its own from the apply", () => {
    const holder = createSnapshotHolder({ tokenStore: createMemoryTokenStore() });
    const withCors = parseApiDefinition({ ...apiDef('c'), plugins: [{ name: 'cors' }] });
    holder.apply(snapshot(1, apiDef('a'), apiDef('b'), withCors));
    const current = holder.current()!;
    expect([...current.upstreams.built.entries()].map(([id]) => id)).toEqual(['api:c']);
    expect(upstreamAt(current, '/c/x')!.pipeline).not.toBeNull();
    const first = upstreamAt(current, '/a/x');
    expect(first).toMatchObject({ pipeline: null });
    expect(upstreamAt(current, '/a/x')).toBe(first);
    expect(upstreamAt(current, '/b/x')).not.toBe(first);
    // The same content applied whole again is new routes, so new state (as every route's was before).
    holder.apply(snapshot(2, apiDef('a'), apiDef('b'), withCors, apiDef('d')));
    expect(upstreamAt(holder.current()!, '/a/x')).not.toBe(first);
  });

  test("a plain route's forwarding state goes with its route: once the held maps fold their changes, a replaced route keeps none alive", async () => {
    const content = (version: number, apis: ApiDefinition[]) => {
      const defs: Definitions = { apis, oauthServers: [] };
      return { version, hash: definitionsHash(defs), defs };
    };
    const others = (v: number) => Array.from({ length: 70 }, (_, i) => apiDef(`o${i}`, `/o${i}/v${v}/*`));
    const holder = createSnapshotHolder({ tokenStore: createMemoryTokenStore() });
    const v1 = content(1, [apiDef('a'), ...others(1)]);
    holder.apply(toSnapshotMessage(1, v1.defs));
    const served = new WeakRef(upstreamAt(holder.current()!, '/a/x')!);
    // The index's persistent maps keep a replaced entry in their shared base until their changes outnumber
    // max(64, √n) and are folded into a new base (layered-map.ts): these 71 are.
    const v2 = content(2, [apiDef('a', '/a2/*'), ...others(2)]);
    expect(holder.applyDelta(toDeltaMessage(v1, v2)).ok).toBe(true);
    const kept = upstreamAt(holder.current()!, '/a2/x');
    await collectGarbage();
    expect(served.deref()).toBeUndefined();
    expect(upstreamAt(holder.current()!, '/a2/x')).toBe(kept);
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
    const holder = createSnapshotHolder({ tokenStore: createMemoryTokenStore() });
    holder.apply(good);
    const before = holder.current();
    const result = holder.apply(bad);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error.length).toBeGreaterThan(0);
    expect(holder.current()).toBe(before);
    expect(holder.current()!.table.match({ ...lookup, path: '/a/1' })?.route.name).toBe('a');
  });

  test('a push (full or an empty delta) with the hash already held is acknowledged without rebuilding', () => {
    const holder = createSnapshotHolder({ tokenStore: createMemoryTokenStore() });
    holder.apply(good);
    const before = holder.current()!;
    expect(holder.apply({ ...good })).toEqual({ ok: true, version: 1, hash: good.hash, changed: false });
    expect(holder.current()).toBe(before);
    // Same content under a new version (the CP's numbering is authoritative): same table, new version.
    expect(holder.apply({ ...good, version: 7 })).toMatchObject({ ok: true, version: 7, changed: false });
    expect(holder.current()!.version).toBe(7);
    expect(holder.current()!.table).toBe(before.table);
    // The CP's empty delta from the held version to the same content under its own (a Hello after its restart).
    const held = { version: 7, hash: good.hash, defs: { apis: [apiDef('a')], oauthServers: [] } };
    expect(holder.applyDelta(toDeltaMessage(held, { ...held, version: 9 }))).toEqual({ ok: true, version: 9, hash: good.hash, changed: false });
    expect(holder.current()!.table).toBe(before.table);
    // An empty delta from a version not held is refused as any delta is.
    expect(holder.applyDelta(toDeltaMessage({ ...held, version: 8 }, { ...held, version: 10 }))).toMatchObject({ ok: false, version: 10 });
    expect(holder.current()!.version).toBe(9);
  });

  test('a full snapshot applied in turns serves the old one until it swaps, lets other work run between turns, and routes as one applied at once', async () => {
    const many = (version: number, moved: string) =>
      snapshot(version, ...Array.from({ length: APPLY_TURN * 3 }, (_, i) => apiDef(`api-${i}`, i === 7 ? `/${moved}/*` : `/api-${i}/*`)));
    const holder = createSnapshotHolder({ tokenStore: createMemoryTokenStore() });
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
    const atOnce = createSnapshotHolder({ tokenStore: createMemoryTokenStore() });
    atOnce.apply(many(2, 'second'));
    const names = (h: typeof holder) =>
      ['/second/x', '/first/x', '/api-8/x', '/none/x'].map((path) => h.current()!.table.match({ ...lookup, path })?.route.name ?? null);
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
    const [inTurns, atOnce] = [createSnapshotHolder({ tokenStore: createMemoryTokenStore() }), createSnapshotHolder({ tokenStore: createMemoryTokenStore() })];
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
      ['/moved/api-1/x', '/api-1/x', '/api-2/x', '/api-0/x', '/added/x'].map((path) => h.current()!.table.match({ ...lookup, path })?.route.name ?? null);
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
    const holder = createSnapshotHolder({ tokenStore: createMemoryTokenStore() });
    holder.apply(toSnapshotMessage(1, base));
    const before = holder.current()!;
    const [cors, plain, changed] = ['/kept-cors/x', '/kept-plain/x', '/api-0/x'].map((path) => upstreamAt(before, path));
    expect(await holder.applyDeltaInTurns(delta)).toEqual({ ok: true, version: 2, hash: delta.hash, changed: true });
    const after = holder.current()!;
    expect(upstreamAt(after, '/kept-cors/x')).toBe(cors);
    expect(upstreamAt(after, '/kept-plain/x')).toBe(plain);
    expect(upstreamAt(after, '/moved/api-0/x')).not.toBe(changed);
    expect(after.table.match({ ...lookup, path: '/api-0/x' })).toBeNull();
    expect(after.authorizer).toBe(before.authorizer);
    // What a later small delta builds on is the large one's result.
    const last = { ...next, apis: next.apis.filter((a) => a.name !== 'kept-plain') };
    expect(
      holder.applyDelta(toDeltaMessage({ version: 2, hash: definitionsHash(next), defs: next }, { version: 3, hash: definitionsHash(last), defs: last })),
    ).toMatchObject({ ok: true, version: 3 });
    expect(holder.current()!.table.match({ ...lookup, path: '/kept-plain/x' })).toBeNull();
    expect(upstreamAt(holder.current()!, '/kept-cors/x')).toBe(cors);
  });

  test('a full snapshot applied in turns: a bad one is refused and the old one kept; one no longer wanted is dropped unapplied', async () => {
    const holder = createSnapshotHolder({ tokenStore: createMemoryTokenStore() });
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
    expect(holder.current()!.table).toBe(before.table);
  });

  test('requests holding the old snapshot keep it after a swap', () => {
    const holder = createSnapshotHolder({ tokenStore: createMemoryTokenStore() });
    holder.apply(good);
    const inFlight = holder.current()!;
    holder.apply(snapshot(2, apiDef('other')));
    expect(inFlight.table.match({ ...lookup, path: '/a/1' })?.route.name).toBe('a');
    expect(holder.current()!.table.match({ ...lookup, path: '/a/1' })).toBeNull();
  });

  test('a delta changes only its routes: they route anew, the others keep their upstream, the old snapshot still answers as before', () => {
    const content = (version: number, apis: ApiDefinition[]) => {
      const defs: Definitions = { apis, oauthServers: [] };
      return { version, hash: definitionsHash(defs), defs };
    };
    const inactive = { ...apiDef('d'), active: false };
    const base = content(1, [apiDef('a'), apiDef('b'), apiDef('c', '/a/c/*'), apiDef('d')]);
    const next = content(2, [apiDef('a'), apiDef('b', '/b2/*'), inactive, apiDef('e', '/a')]);
    const holder = createSnapshotHolder({ tokenStore: createMemoryTokenStore() });
    holder.apply(toSnapshotMessage(1, base.defs));
    const before = holder.current()!;
    expect(holder.applyDelta(toDeltaMessage(base, next))).toEqual({ ok: true, version: 2, hash: next.hash, changed: true });
    const after = holder.current()!;
    const fresh = createSnapshotHolder({ tokenStore: createMemoryTokenStore() });
    fresh.apply(toSnapshotMessage(2, next.defs));
    const paths = ['/a', '/a/1', '/a/c/1', '/b/1', '/b2/1', '/d/1', '/e/1'];
    const names = (snapshot: typeof after) => paths.map((path) => snapshot.table.match({ ...lookup, path })?.route.name ?? null);
    // 'e' (exact '/a') joins the bucket of 'a' ('/a/*') and goes first there; 'c' left '/a/c/', 'd' is inactive, 'b' moved.
    expect(names(after)).toEqual(['e', 'a', 'a', null, 'b', null, null]);
    expect(names(after)).toEqual(names(fresh.current()!));
    expect(after.table.size).toBe(fresh.current()!.table.size);
    expect(upstreamAt(after, '/a/1')).toBe(upstreamAt(before, '/a/1'));
    expect(upstreamAt(after, '/b2/1')).not.toBe(upstreamAt(before, '/b/1'));
    expect(upstreamAt(after, '/a')).toBeDefined();
    expect(names(before)).toEqual(['a', 'a', 'c', 'b', null, 'd', null]);
  });

  test('a delta leaves untouched cb and health-checked routes as they were (no rebuild), keeps their state, and drops what removed routes held', async () => {
    const content = (version: number, apis: ApiDefinition[]) => {
      const defs: Definitions = { apis, oauthServers: [] };
      return { version, hash: definitionsHash(defs), defs };
    };
    const withCb = (name: string) =>
      parseApiDefinition({ ...apiDef(name), plugins: [{ name: 'cb', config: { consecutive_failures: 1, sleep_window: 60_000 } }] });
    const checked = (name: string, target: string) =>
      parseApiDefinition({
        name,
        proxy: { listen_path: `/${name}/*`, upstreams: { targets: [{ target }], health_check: { passive: { unhealthy_threshold: 1 } } } },
      });
    const registry = new Registry();
    const health = createHealthRegistry({ probe: async () => null, registry });
    const holder = createSnapshotHolder({ tokenStore: createMemoryTokenStore(), registry, health });
    const gauge = async (name: string) => (await registry.getSingleMetric(name)!.get()).values.map((v) => `${v.labels.route} ${v.value}`).sort();
    const v1 = content(1, [withCb('breaker'), checked('health', 'http://127.0.0.1:9001'), checked('gone', 'http://127.0.0.1:9002'), apiDef('plain')]);
    holder.apply(toSnapshotMessage(1, v1.defs));
    const before = holder.current()!;
    // One failed attempt through the route's own passive stage takes its target out (unhealthy_threshold 1).
    const route = upstreamAt(before, '/health/x')!;
    const exchange = { target: route.balancer.next(), req: { socket: { destroyed: false } } } as unknown as PluginExchange;
    await route.pipeline!.forward[0]!(exchange, async () => ({ kind: 'error', error: new GatehouseError('UPSTREAM_UNREACHABLE', 'refused') }));
    expect(await gauge('gatehouse_upstream_target_healthy')).toEqual(['api:gone 1', 'api:health 0']);

    const v2 = content(2, [withCb('breaker'), checked('health', 'http://127.0.0.1:9001'), apiDef('plain', '/plain2/*')]);
    expect(holder.applyDelta(toDeltaMessage(v1, v2)).ok).toBe(true);
    const after = holder.current()!;
    expect(upstreamAt(after, '/breaker/x')).toBe(upstreamAt(before, '/breaker/x'));
    expect(upstreamAt(after, '/health/x')).toBe(upstreamAt(before, '/health/x'));
    expect(upstreamAt(after, '/plain2/x')).not.toBe(upstreamAt(before, '/plain/x'));
    // Routes with plugins or health checks are built with the snapshot, the removed one's dropped.
    expect([...after.upstreams.built.entries()].map(([id]) => id).sort()).toEqual(['api:breaker', 'api:health']);
    expect(await gauge('gatehouse_upstream_target_healthy')).toEqual(['api:health 0']);
    expect(await gauge('gatehouse_circuit_breaker_state')).toEqual(['api:breaker 0']);
    health.stop();
  });

  test('metrics show the applied version and each result', async () => {
    const registry = new Registry();
    const holder = createSnapshotHolder({ tokenStore: createMemoryTokenStore(), registry });
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
  test('a delta re-keys key_auth credentials, two of them swapping keys included; untouched keys keep working', () => {
    const protectedApi = parseApiDefinition({ ...apiDef('keyed'), plugins: [{ name: 'key_auth' }] });
    const content = (version: number, credentials: Array<[string, string]>) => {
      const defs: Definitions = {
        apis: [protectedApi],
        oauthServers: [],
        keyAuthCredentials: credentials.map(([username, key]) => ({ username, key_hash: legacyHashApiKey(key) })),
      };
      return { version, hash: definitionsHash(defs), defs };
    };
    const owner = (key: string) => keyOwner(holder, key);
    const holder = createSnapshotHolder({ tokenStore: createMemoryTokenStore() });
    const v1 = content(1, [
      ['ann', 'key-one-0123456789'],
      ['bob', 'key-two-0123456789'],
      ['cy', 'key-three-0123456789'],
    ]);
    holder.apply(toSnapshotMessage(1, v1.defs));
    expect([owner('key-one-0123456789'), owner('key-two-0123456789'), owner('nobody-0123456789')]).toEqual(['ann', 'bob', 'KEY_REJECTED']);
    const v2 = content(2, [
      ['ann', 'key-two-0123456789'],
      ['bob', 'key-one-0123456789'],
      ['cy', 'key-three-0123456789'],
    ]);
    expect(holder.applyDelta(toDeltaMessage(v1, v2)).ok).toBe(true);
    expect([owner('key-one-0123456789'), owner('key-two-0123456789'), owner('key-three-0123456789')]).toEqual(['bob', 'ann', 'cy']);
    const v3 = content(3, [
      ['bob', 'key-one-0123456789'],
      ['cy', 'key-three-0123456789'],
    ]);
    expect(holder.applyDelta(toDeltaMessage(v2, v3)).ok).toBe(true);
    expect([owner('key-two-0123456789'), owner('key-one-0123456789')]).toEqual(['KEY_REJECTED', 'bob']);
  });
  test("keyed key_auth hashes verify under the snapshot's installation key only; a snapshot with another key re-keys them; one without a key is refused", () => {
    const protectedApi = parseApiDefinition({ ...apiDef('keyed'), plugins: [{ name: 'key_auth' }] });
    const first = 'first-installation-key-0123456789';
    const second = 'second-installation-key-0123456789';
    const defs: Definitions = {
      apis: [protectedApi],
      oauthServers: [],
      keyAuthCredentials: [
        { username: 'ann', key_hash: hashApiKey('ann-key-0123456789', importHashKey(first)) },
        { username: 'old', key_hash: legacyHashApiKey('old-key-0123456789') },
      ],
    };
    const owner = (key: string) => keyOwner(holder, key);
    const holder = createSnapshotHolder({ tokenStore: createMemoryTokenStore() });
    expect(holder.apply(toSnapshotMessage(1, defs, undefined, first)).ok).toBe(true);
    expect([owner('ann-key-0123456789'), owner('old-key-0123456789'), owner('nobody-0123456789')]).toEqual(['ann', 'old', 'KEY_REJECTED']);
    // The same definitions under another installation key: another hash, applied, and the keyed hash no longer matches.
    const rekeyed = toSnapshotMessage(2, defs, undefined, second);
    expect(holder.apply(rekeyed)).toMatchObject({ ok: true, changed: true });
    expect([owner('ann-key-0123456789'), owner('old-key-0123456789')]).toEqual(['KEY_REJECTED', 'old']);
    // Keyed hashes with no key to verify them: refused, the held snapshot kept.
    const keyless = toSnapshotMessage(3, defs);
    expect(holder.apply(keyless)).toMatchObject({ ok: false, error: expect.stringContaining('no key_auth_hash_key') });
    expect(holder.current()!.hash).toBe(rekeyed.hash);
  });
  test("a delta that changes only a credential's groups changes what acl judges by; other credentials keep theirs", () => {
    const guarded = parseApiDefinition({ ...apiDef('guarded'), plugins: [{ name: 'key_auth' }, { name: 'acl', config: { allow: ['admins'] } }] });
    const content = (version: number, annGroups?: string[]) => {
      const keyAuthCredentials = [
        { username: 'ann', key_hash: legacyHashApiKey('ann-key-0123456789'), ...(annGroups && { groups: annGroups }) },
        { username: 'bob', key_hash: legacyHashApiKey('bob-key-0123456789'), groups: ['admins'] },
      ];
      const defs: Definitions = { apis: [guarded], oauthServers: [], keyAuthCredentials };
      return { version, hash: definitionsHash(defs), defs };
    };
    /** The route's verdict on `key`: the X-Consumer-Groups acl sends, or the refusal's code. */
    const verdict = (key: string): string | null => {
      const pipeline = upstreamAt(holder.current()!, '/guarded/x')!.pipeline!;
      const exchange = {
        req: { rawHeaders: ['apikey', key], headers: { apikey: key } },
        headers: ['apikey', key],
        query: '',
        consumer: null,
        groupsHeader: null,
        addClientHeader: () => undefined,
        authenticate: PluginExchange.prototype.authenticate,
      } as unknown as PluginExchange;
      try {
        for (const hook of pipeline.request) hook(exchange);
      } catch (err) {
        return (err as GatehouseError).code;
      }
      return exchange.groupsHeader;
    };
    const holder = createSnapshotHolder({ tokenStore: createMemoryTokenStore() });
    const v1 = content(1, ['ops']);
    holder.apply(toSnapshotMessage(1, v1.defs));
    expect([verdict('ann-key-0123456789'), verdict('bob-key-0123456789')]).toEqual(['ACL_FORBIDDEN', 'admins']);
    const v2 = content(2, ['admins', 'ops']);
    expect(holder.applyDelta(toDeltaMessage(v1, v2)).ok).toBe(true);
    expect([verdict('ann-key-0123456789'), verdict('bob-key-0123456789')]).toEqual(['admins, ops', 'admins']);
    const v3 = content(3);
    expect(holder.applyDelta(toDeltaMessage(v2, v3)).ok).toBe(true);
    expect([verdict('ann-key-0123456789'), verdict('bob-key-0123456789')]).toEqual(['ACL_FORBIDDEN', 'admins']);
  });

  test.each(['a full snapshot', 'a delta'])(
    "an issuer %s no longer names is forgotten by the process's OpenID provider client; a kept one is not fetched again",
    async (how) => {
      const [kept, dropped] = await Promise.all([startOidcProvider(), startOidcProvider()]);
      const pools = createUpstreamPools();
      try {
        const withOidc = (name: string, issuer: string) =>
          parseApiDefinition({
            name,
            proxy: { listen_path: `/${name}/*`, upstreams: { targets: [{ target: 'http://127.0.0.1:9000' }] } },
            plugins: [{ name: 'openid_connect', config: { issuer, client_id: 'app', client_secret: 's', cookie_secret: 'k'.repeat(32) } }],
          });
        const [keptApi, droppedApi] = [withOidc('kept', kept.issuer), withOidc('dropped', dropped.issuer)];
        const configOf = (api: ApiDefinition) => compilePlugins(api.plugins)[0]!.config as CompiledOpenidConnect;
        const oidc = createOidcProviders({ pools, jwks: createJwksCache({ pools }) });
        const holder = createSnapshotHolder({ tokenStore: createMemoryTokenStore(), oidc });
        const content = (version: number, apis: ApiDefinition[]) => {
          const defs: Definitions = { apis, oauthServers: [] };
          return { version, hash: definitionsHash(defs), defs };
        };
        const [v1, v2] = [content(1, [keptApi, droppedApi, apiDef('plain')]), content(2, [keptApi, apiDef('plain')])];
        expect(holder.apply(toSnapshotMessage(1, v1.defs)).ok).toBe(true);
        await Promise.all([oidc.endpoints(configOf(keptApi)), oidc.endpoints(configOf(droppedApi))]);
        expect((how === 'a delta' ? holder.applyDelta(toDeltaMessage(v1, v2)) : holder.apply(toSnapshotMessage(2, v2.defs))).ok).toBe(true);
        await Promise.all([oidc.endpoints(configOf(keptApi)), oidc.endpoints(configOf(droppedApi))]);
        expect([kept.discoveryFetches, dropped.discoveryFetches]).toEqual([1, 2]);
      } finally {
        await pools.close();
        await Promise.all([kept.close(), dropped.close()]);
      }
    },
  );
});
