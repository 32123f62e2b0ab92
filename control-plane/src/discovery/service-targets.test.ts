import { createLogger } from '#proto/logger';
import { parseApiDefinition, type ApiDefinition, type Definitions } from '#proto/definition/index';
import { definitionsHash, toDeltaMessage } from '#proto/snapshot/codec';
import type { ServiceTarget } from '#proto/compile/index';
import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';
import type { StoreListener, StoreState } from '../store/index.js';
import type { Endpoint, EndpointWatch } from './endpoint-watch.js';
import { checkServiceTargets, serveServiceTargets } from './service-targets.js';

const logger = createLogger('control-plane', 'silent');
const flush = () => new Promise(setImmediate);

const api = (name: string, targets: Array<{ target: string; weight?: number }>): ApiDefinition =>
  parseApiDefinition({ name, proxy: { listen_path: `/${name}/*`, upstreams: { balancing: 'weight', targets } } });

function fakeStore(apis: ApiDefinition[]) {
  const listeners = new Set<StoreListener>();
  const stateOf = (revision: number, defs: Definitions): StoreState => ({ revision, defs, hash: definitionsHash(defs) });
  let state = stateOf(1, { apis, oauthServers: [] });
  return {
    current: () => state,
    subscribe(listener: StoreListener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    write(next: ApiDefinition[]) {
      state = stateOf(state.revision + 1, { apis: next, oauthServers: [] });
      for (const l of listeners) l(state);
    },
  };
}

/** Endpoints by `namespace/service/port`; what a real watch reads from EndpointSlices. */
function fakeWatch(endpoints: Map<string, Endpoint[]>): EndpointWatch & { watched: Set<string> } {
  const watched = new Set<string>();
  return {
    namespaces: ['gatehouse', 'shop'],
    watched,
    endpoints: (namespace: string, t: ServiceTarget) => endpoints.get(`${namespace}/${t.name}/${t.port}`) ?? [],
    watch: (namespace: string) => void watched.add(namespace),
    ready: async () => {},
    close: () => {},
  };
}

const targetsOf = (state: StoreState, name: string) => state.defs.apis.find((a) => a.name === name)!.proxy.upstreams.targets;

test('a Service target becomes one target per endpoint, with its weight and path; IPv6 bracketed; URL targets kept', () => {
  const endpoints = new Map([
    [
      'shop/orders/http',
      [
        { ip: '10.0.0.1', port: 3000 },
        { ip: 'fd00::7', port: 3000 },
      ],
    ],
  ]);
  const store = fakeStore([api('orders', [{ target: 'http://fixed:80' }, { target: 'k8s://orders.shop:http/base', weight: 3 }])]);
  const watch = fakeWatch(endpoints);
  const served = serveServiceTargets(store, watch, logger);
  expect(targetsOf(served.current(), 'orders')).toEqual([
    { target: 'http://fixed:80', weight: 1 },
    { target: 'http://10.0.0.1:3000/base', weight: 3 },
    { target: 'http://[fd00::7]:3000/base', weight: 3 },
  ]);
  expect(watch.watched).toEqual(new Set(['shop']));
  // The store keeps the definition as written.
  expect(targetsOf(store.current(), 'orders')[1].target).toBe('k8s://orders.shop:http/base');
});

test('without Service targets the store state is served as it is', () => {
  const store = fakeStore([api('plain', [{ target: 'http://u' }])]);
  const served = serveServiceTargets(store, fakeWatch(new Map()), logger);
  expect(served.current()).toBe(store.current());
  store.write([api('plain', [{ target: 'http://v' }])]);
  expect(served.current()).toBe(store.current());
});

test('an endpoint change is a new, higher version whose delta holds only the APIs naming that Service', async () => {
  const endpoints = new Map([['gatehouse/a/80', [{ ip: '10.0.0.1', port: 8080 }]]]);
  const store = fakeStore([api('a', [{ target: 'k8s://a:80' }]), api('b', [{ target: 'k8s://b:80' }]), api('c', [{ target: 'http://c' }])]);
  const served = serveServiceTargets(store, fakeWatch(endpoints), logger);
  const before = served.current();
  endpoints.set('gatehouse/a/80', [
    { ip: '10.0.0.1', port: 8080 },
    { ip: '10.0.0.2', port: 8080 },
  ]);
  served.endpointsChanged('gatehouse', 'a');
  await flush();
  const after = served.current();
  expect(after.revision).toBe(before.revision + 1);
  expect(served.storeRevisionOf(after.revision)).toBe(store.current().revision);
  const delta = toDeltaMessage(
    { version: before.revision, hash: before.hash, defs: before.defs },
    { version: after.revision, hash: after.hash, defs: after.defs },
  );
  expect(delta.apis.map((m) => (m as { name: string }).name)).toEqual(['a']);
  // A Service without endpoints keeps its target (the data plane answers NO_ENDPOINTS).
  expect(targetsOf(after, 'b')).toEqual([{ target: 'k8s://b:80', weight: 1 }]);
  // A change nobody names, or one that changes nothing, makes no version.
  served.endpointsChanged('gatehouse', 'unnamed');
  served.endpointsChanged('gatehouse', 'a');
  await flush();
  expect(served.current()).toBe(after);
  // A store write after it gets a version above both, and its admin X-Snapshot-Version says which.
  store.write([...store.current().defs.apis, api('d', [{ target: 'http://d' }])]);
  expect(served.current().revision).toBe(after.revision + 1);
  expect(served.versionOf(store.current().revision)).toBe(served.current().revision);
});

test('an API that stops naming a Service is served as written, and the Service no longer re-expands it', async () => {
  const endpoints = new Map([['gatehouse/a/80', [{ ip: '10.0.0.1', port: 8080 }]]]);
  const store = fakeStore([api('a', [{ target: 'k8s://a:80' }])]);
  const served = serveServiceTargets(store, fakeWatch(endpoints), logger);
  const plain = api('a', [{ target: 'http://x' }]);
  store.write([plain]);
  expect(served.current().defs.apis[0]).toBe(plain);
  const version = served.current().revision;
  served.endpointsChanged('gatehouse', 'a');
  await flush();
  expect(served.current().revision).toBe(version);
});

test('the admin check: no Kubernetes client, or a namespace not discovered in, is a 400 naming the target', () => {
  const named = api('a', [{ target: 'http://ok' }, { target: 'k8s://orders.elsewhere:80' }]);
  expect(gatehouseErrorOf(() => checkServiceTargets(named, null))).toMatchObject({
    code: 'VALIDATION_FAILED',
    field: 'proxy.upstreams.targets[1].target',
    message: expect.stringContaining('needs the control plane to run with STORE=kubernetes'),
  });
  expect(gatehouseErrorOf(() => checkServiceTargets(named, { namespaces: ['gatehouse', 'shop'] })).message).toContain(
    'names namespace "elsewhere", where this control plane does not discover Services (gatehouse, shop; see DISCOVERY_NAMESPACES)',
  );
  expect(() => checkServiceTargets(api('b', [{ target: 'k8s://orders.shop:80' }]), { namespaces: ['gatehouse', 'shop'] })).not.toThrow();
});

test("route APIs (Gateway API) are served after the store's, expanded, in a new version that maps back to the store revision; store writes keep them", () => {
  const endpoints = new Map([['gatehouse/web/8080', [{ ip: '10.0.0.9', port: 3000 }]]]);
  const store = fakeStore([api('own', [{ target: 'http://fixed:80' }])]);
  const served = serveServiceTargets(store, fakeWatch(endpoints), logger);
  served.setRouteApis([api('httproute.gatehouse.r.0.0', [{ target: 'k8s://web.gatehouse:8080', weight: 2 }]), api('own', [{ target: 'http://shadowed:80' }])]);
  const state = served.current();
  expect(state.defs.apis.map((a) => a.name)).toEqual(['own', 'httproute.gatehouse.r.0.0']);
  expect(targetsOf(state, 'own')).toEqual([{ target: 'http://fixed:80', weight: 1 }]); // the store's name wins
  expect(targetsOf(state, 'httproute.gatehouse.r.0.0')).toEqual([{ target: 'http://10.0.0.9:3000/', weight: 2 }]);
  expect(state.revision).toBeGreaterThan(store.current().revision);
  expect(served.storeRevisionOf(state.revision)).toBe(store.current().revision);
  store.write([api('own', [{ target: 'http://fixed:81' }])]);
  expect(served.current().defs.apis.map((a) => a.name)).toEqual(['own', 'httproute.gatehouse.r.0.0']);
  served.setRouteApis([]);
  expect(served.current().defs.apis.map((a) => a.name)).toEqual(['own']);
  served.close();
});

test('Gateway HTTPS listeners are served with the definitions: a change (a rotated key) is a new version, the same ones are none; store writes keep them', () => {
  const store = fakeStore([api('own', [{ target: 'http://fixed:80' }])]);
  const served = serveServiceTargets(store, null, logger);
  const versions: number[] = [];
  served.subscribe((state) => versions.push(state.revision));
  const listener = (key: string) => ({
    name: 'ns/gw/https',
    hostname: 'a.example.org',
    port: 443,
    certificates: [{ certificate_chain: 'chain', private_key: key }],
  });
  served.setGatewayTls([listener('first key')]);
  expect(served.current().gatewayTls).toEqual([listener('first key')]);
  served.setGatewayTls([listener('first key')]);
  served.setGatewayTls([listener('rotated key')]);
  expect(versions).toHaveLength(2);
  expect(versions[1]).toBeGreaterThan(versions[0]);
  store.write([api('own', [{ target: 'http://fixed:81' }])]);
  expect(served.current().gatewayTls).toEqual([listener('rotated key')]);
  served.setGatewayTls([]);
  expect(served.current()).not.toHaveProperty('gatewayTls');
  expect(versions).toHaveLength(4);
  served.close();
});

test('route APIs given again as the same objects keep their expansion (no new version); a new object or an endpoint change expands again', async () => {
  const endpoints = new Map([['gatehouse/web/8080', [{ ip: '10.0.0.9', port: 3000 }]]]);
  const store = fakeStore([]);
  const served = serveServiceTargets(store, fakeWatch(endpoints), logger);
  const [r0, r1] = [0, 1].map((i) => api(`httproute.gatehouse.r${i}.0.0`, [{ target: 'k8s://web.gatehouse:8080' }]));
  served.setRouteApis([r0, r1]);
  const first = served.current();
  served.setRouteApis([r0, r1]);
  expect(served.current()).toBe(first);
  const changed = api(r1.name, [{ target: 'k8s://web.gatehouse:8080', weight: 2 }]);
  served.setRouteApis([r0, changed]);
  const second = served.current();
  expect(second.revision).toBe(first.revision + 1);
  expect(second.defs.apis[0]).toBe(first.defs.apis[0]); // r0's expansion, kept
  expect(targetsOf(second, r1.name)).toEqual([{ target: 'http://10.0.0.9:3000/', weight: 2 }]);
  endpoints.set('gatehouse/web/8080', [{ ip: '10.0.0.10', port: 3000 }]);
  served.endpointsChanged('gatehouse', 'web');
  await flush();
  served.setRouteApis([r0, changed]);
  expect(targetsOf(served.current(), r0.name)).toEqual([{ target: 'http://10.0.0.10:3000/', weight: 1 }]);
  expect(targetsOf(served.current(), r1.name)).toEqual([{ target: 'http://10.0.0.10:3000/', weight: 2 }]);
  served.close();
});
