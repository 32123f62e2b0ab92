import { parseApiDefinition, type ApiDefinition } from '#proto/definition/index';
import {
  applyDeltaMessage,
  definitionsHash,
  fromSnapshotMessage,
  toDeltaMessage,
  toSnapshotMessage,
  type DeltaMessage,
  type SnapshotMessage,
} from '#proto/snapshot/codec';
import type { Definitions } from '#proto/definition/types';
import { Registry } from 'prom-client';
import { createMemoryTokenStore } from '../auth/index.js';
import { GatehouseError } from '#proto/errors';
import { hashApiKey, importHashKey, legacyHashApiKey } from '#proto/api-key';
import { createHealthRegistry } from '../health/index.js';
import { PluginExchange } from '../plugins/index.js';
import { createTableBuilder, type BuiltTable, type ServingTable, type TableDeps } from './index.js';
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

/**
 * Tables built one after another as the snapshot holder builds them (sync/snapshot-holder.ts), without its checks,
 * turns and metrics: a full snapshot's from nothing, a delta's on the last one, each committed as it is swapped in.
 */
function tablesOf(deps: TableDeps = { tokenStore: createMemoryTokenStore() }) {
  const builder = createTableBuilder(deps);
  let last: BuiltTable | null = null;
  const swap = (built: BuiltTable): ServingTable => {
    built.commit();
    return (last = built).table;
  };
  return {
    current: (): ServingTable | null => last?.table ?? null,
    apply: (message: SnapshotMessage) => swap(builder.build(fromSnapshotMessage(message), null)),
    applyDelta(delta: DeltaMessage): ServingTable {
      const { changes, ...content } = applyDeltaMessage(last!.basis.content, delta);
      return swap(builder.build(content, { basis: last!.basis, table: last!.table, changes: changes! }));
    },
  };
}

const lookup = { method: 'GET', host: 'any.test' };

/** The forwarding state of the route `table` matches for GET `path`. */
const upstreamAt = (table: ServingTable, path: string) => table.upstreams.get(table.routing.match({ ...lookup, path })!.route);

/** Who the '/keyed/x' route's request hooks say the API key belongs to (the upstream's X-Consumer-Username), or the refusal's code. */
function keyOwner(table: ServingTable, key: string): string {
  const pipeline = upstreamAt(table, '/keyed/x')!.pipeline!;
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

describe('serving table build', () => {
  test("a plain route's forwarding state is made at its first request and kept; a route with plugins has its own from the apply", () => {
    const tables = tablesOf();
    const withCors = parseApiDefinition({ ...apiDef('c'), plugins: [{ name: 'cors' }] });
    tables.apply(snapshot(1, apiDef('a'), apiDef('b'), withCors));
    const current = tables.current()!;
    expect([...current.upstreams.built.entries()].map(([id]) => id)).toEqual(['api:c']);
    expect(upstreamAt(current, '/c/x')!.pipeline).not.toBeNull();
    const first = upstreamAt(current, '/a/x');
    expect(first).toMatchObject({ pipeline: null });
    expect(upstreamAt(current, '/a/x')).toBe(first);
    expect(upstreamAt(current, '/b/x')).not.toBe(first);
    // The same content applied whole again is new routes, so new state (as every route's was before).
    tables.apply(snapshot(2, apiDef('a'), apiDef('b'), withCors, apiDef('d')));
    expect(upstreamAt(tables.current()!, '/a/x')).not.toBe(first);
  });

  test("a plain route's forwarding state goes with its route: once the held maps fold their changes, a replaced route keeps none alive", async () => {
    const content = (version: number, apis: ApiDefinition[]) => {
      const defs: Definitions = { apis, oauthServers: [] };
      return { version, hash: definitionsHash(defs), defs };
    };
    const others = (v: number) => Array.from({ length: 70 }, (_, i) => apiDef(`o${i}`, `/o${i}/v${v}/*`));
    const tables = tablesOf();
    const v1 = content(1, [apiDef('a'), ...others(1)]);
    tables.apply(toSnapshotMessage(1, v1.defs));
    const served = new WeakRef(upstreamAt(tables.current()!, '/a/x')!);
    // The index's persistent maps keep a replaced entry in their shared base until their changes outnumber
    // max(64, √n) and are folded into a new base (layered-map.ts): these 71 are.
    const v2 = content(2, [apiDef('a', '/a2/*'), ...others(2)]);
    tables.applyDelta(toDeltaMessage(v1, v2));
    const kept = upstreamAt(tables.current()!, '/a2/x');
    await collectGarbage();
    expect(served.deref()).toBeUndefined();
    expect(upstreamAt(tables.current()!, '/a2/x')).toBe(kept);
  });

  test('a delta changes only its routes: they route anew, the others keep their upstream, the old snapshot still answers as before', () => {
    const content = (version: number, apis: ApiDefinition[]) => {
      const defs: Definitions = { apis, oauthServers: [] };
      return { version, hash: definitionsHash(defs), defs };
    };
    const inactive = { ...apiDef('d'), active: false };
    const base = content(1, [apiDef('a'), apiDef('b'), apiDef('c', '/a/c/*'), apiDef('d')]);
    const next = content(2, [apiDef('a'), apiDef('b', '/b2/*'), inactive, apiDef('e', '/a')]);
    const tables = tablesOf();
    tables.apply(toSnapshotMessage(1, base.defs));
    const before = tables.current()!;
    expect(tables.applyDelta(toDeltaMessage(base, next))).toMatchObject({ version: 2, hash: next.hash });
    const after = tables.current()!;
    const fresh = tablesOf();
    fresh.apply(toSnapshotMessage(2, next.defs));
    const paths = ['/a', '/a/1', '/a/c/1', '/b/1', '/b2/1', '/d/1', '/e/1'];
    const names = (snapshot: typeof after) => paths.map((path) => snapshot.routing.match({ ...lookup, path })?.route.name ?? null);
    // 'e' (exact '/a') joins the bucket of 'a' ('/a/*') and goes first there; 'c' left '/a/c/', 'd' is inactive, 'b' moved.
    expect(names(after)).toEqual(['e', 'a', 'a', null, 'b', null, null]);
    expect(names(after)).toEqual(names(fresh.current()!));
    expect(after.routing.size).toBe(fresh.current()!.routing.size);
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
    const tables = tablesOf({ tokenStore: createMemoryTokenStore(), registry, health });
    const gauge = async (name: string) => (await registry.getSingleMetric(name)!.get()).values.map((v) => `${v.labels.route} ${v.value}`).sort();
    const v1 = content(1, [withCb('breaker'), checked('health', 'http://127.0.0.1:9001'), checked('gone', 'http://127.0.0.1:9002'), apiDef('plain')]);
    tables.apply(toSnapshotMessage(1, v1.defs));
    const before = tables.current()!;
    // One failed attempt through the route's own passive stage takes its target out (unhealthy_threshold 1).
    const route = upstreamAt(before, '/health/x')!;
    const exchange = { target: route.balancer.next(), req: { socket: { destroyed: false } } } as unknown as PluginExchange;
    await route.pipeline!.forward[0]!(exchange, async () => ({ kind: 'error', error: new GatehouseError('UPSTREAM_UNREACHABLE', 'refused') }));
    expect(await gauge('gatehouse_upstream_target_healthy')).toEqual(['api:gone 1', 'api:health 0']);

    const v2 = content(2, [withCb('breaker'), checked('health', 'http://127.0.0.1:9001'), apiDef('plain', '/plain2/*')]);
    tables.applyDelta(toDeltaMessage(v1, v2));
    const after = tables.current()!;
    expect(upstreamAt(after, '/breaker/x')).toBe(upstreamAt(before, '/breaker/x'));
    expect(upstreamAt(after, '/health/x')).toBe(upstreamAt(before, '/health/x'));
    expect(upstreamAt(after, '/plain2/x')).not.toBe(upstreamAt(before, '/plain/x'));
    // Routes with plugins or health checks are built with the snapshot, the removed one's dropped.
    expect([...after.upstreams.built.entries()].map(([id]) => id).sort()).toEqual(['api:breaker', 'api:health']);
    expect(await gauge('gatehouse_upstream_target_healthy')).toEqual(['api:health 0']);
    expect(await gauge('gatehouse_circuit_breaker_state')).toEqual(['api:breaker 0']);
    health.stop();
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
    const owner = (key: string) => keyOwner(tables.current()!, key);
    const tables = tablesOf();
    const v1 = content(1, [
      ['ann', 'key-one-0123456789'],
      ['bob', 'key-two-0123456789'],
      ['cy', 'key-three-0123456789'],
    ]);
    tables.apply(toSnapshotMessage(1, v1.defs));
    expect([owner('key-one-0123456789'), owner('key-two-0123456789'), owner('nobody-0123456789')]).toEqual(['ann', 'bob', 'KEY_REJECTED']);
    const v2 = content(2, [
      ['ann', 'key-two-0123456789'],
      ['bob', 'key-one-0123456789'],
      ['cy', 'key-three-0123456789'],
    ]);
    tables.applyDelta(toDeltaMessage(v1, v2));
    expect([owner('key-one-0123456789'), owner('key-two-0123456789'), owner('key-three-0123456789')]).toEqual(['bob', 'ann', 'cy']);
    const v3 = content(3, [
      ['bob', 'key-one-0123456789'],
      ['cy', 'key-three-0123456789'],
    ]);
    tables.applyDelta(toDeltaMessage(v2, v3));
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
    const owner = (key: string) => keyOwner(tables.current()!, key);
    const tables = tablesOf();
    tables.apply(toSnapshotMessage(1, defs, undefined, first));
    expect([owner('ann-key-0123456789'), owner('old-key-0123456789'), owner('nobody-0123456789')]).toEqual(['ann', 'old', 'KEY_REJECTED']);
    // The same definitions under another installation key: another hash, applied, and the keyed hash no longer matches.
    const rekeyed = toSnapshotMessage(2, defs, undefined, second);
    expect(tables.apply(rekeyed).hash).toBe(rekeyed.hash);
    expect([owner('ann-key-0123456789'), owner('old-key-0123456789')]).toEqual(['KEY_REJECTED', 'old']);
    // Keyed hashes with no key to verify them: refused, the held snapshot kept.
    const keyless = toSnapshotMessage(3, defs);
    expect(() => tables.apply(keyless)).toThrow('no key_auth_hash_key');
    expect(tables.current()!.hash).toBe(rekeyed.hash);
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
      const pipeline = upstreamAt(tables.current()!, '/guarded/x')!.pipeline!;
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
    const tables = tablesOf();
    const v1 = content(1, ['ops']);
    tables.apply(toSnapshotMessage(1, v1.defs));
    expect([verdict('ann-key-0123456789'), verdict('bob-key-0123456789')]).toEqual(['ACL_FORBIDDEN', 'admins']);
    const v2 = content(2, ['admins', 'ops']);
    tables.applyDelta(toDeltaMessage(v1, v2));
    expect([verdict('ann-key-0123456789'), verdict('bob-key-0123456789')]).toEqual(['admins, ops', 'admins']);
    const v3 = content(3);
    tables.applyDelta(toDeltaMessage(v2, v3));
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
        const tables = tablesOf({ tokenStore: createMemoryTokenStore(), oidc });
        const content = (version: number, apis: ApiDefinition[]) => {
          const defs: Definitions = { apis, oauthServers: [] };
          return { version, hash: definitionsHash(defs), defs };
        };
        const [v1, v2] = [content(1, [keptApi, droppedApi, apiDef('plain')]), content(2, [keptApi, apiDef('plain')])];
        tables.apply(toSnapshotMessage(1, v1.defs));
        await Promise.all([oidc.endpoints(configOf(keptApi)), oidc.endpoints(configOf(droppedApi))]);
        if (how === 'a delta') tables.applyDelta(toDeltaMessage(v1, v2));
        else tables.apply(toSnapshotMessage(2, v2.defs));
        await Promise.all([oidc.endpoints(configOf(keptApi)), oidc.endpoints(configOf(droppedApi))]);
        expect([kept.discoveryFetches, dropped.discoveryFetches]).toEqual([1, 2]);
      } finally {
        await pools.close();
        await Promise.all([kept.close(), dropped.close()]);
      }
    },
  );
});
