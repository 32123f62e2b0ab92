/**
 * What the data planes are served: the store's definitions with each Kubernetes Service target
 * (`k8s://orders.shop:8080/base`) replaced by one target per ready endpoint (`http://10.1.2.3:8080/base`,
 * the Service target's weight each). The store, and so `GET /apis`, keeps the definition as written.
 *
 * A version is the store's revision plus the number of endpoint changes so far, so both kinds of change
 * give a new, higher one; an endpoint change re-expands only the APIs naming that Service, and the
 * snapshot builder's delta carries only those. With no Service target anywhere this is the store itself.
 * A Service without a ready endpoint keeps its target: the data plane answers it NO_ENDPOINTS (503).
 */
import { compileTarget, isServiceTarget, type ServiceTarget } from '#proto/compile/index';
import type { ApiDefinition } from '#proto/definition/index';
import { fieldError } from '#proto/definition/field-path';
import type { Logger } from '#proto/logger';
import { canonicalGatewayTls, definitionsHash, editsFrom, sameGatewayTls, type GatewayListenerTls } from '#proto/snapshot/codec';
import type { DefinitionStore, StoreListener, StoreState } from '../store/index.js';
import type { EndpointWatch } from './endpoint-watch.js';

/** Snapshot versions remembered for storeRevisionOf: a data plane's last reply is always a recent one. */
const VERSIONS_KEPT = 1000;

export interface ServedDefinitions extends Pick<DefinitionStore, 'current' | 'subscribe'> {
  /** Called by the endpoint watch: `service` in `namespace` changed. */
  endpointsChanged(namespace: string, service: string): void;
  /** The definitions translated from Gateway API routes (gateway-api/), served after the store's; a name the store holds is skipped. */
  setRouteApis(apis: readonly ApiDefinition[]): void;
  /** The Gateway API HTTPS listeners with their certificates (gateway-api/), served with the definitions: a change is a new version. */
  setGatewayTls(listeners: readonly GatewayListenerTls[]): void;
  /** The store revision snapshot `version` was made from (the controller counts CR generations by it). */
  storeRevisionOf(version: number): number;
  /** The first snapshot version holding store revision `revision` (an admin write's X-Snapshot-Version). */
  versionOf(revision: number): number;
  close(): void;
}

const serviceOf = (template: string): { scheme: string; path: string; service: ServiceTarget } => {
  const { scheme, path, service } = compileTarget(template, [], 'target');
  return { scheme, path, service: service! };
};

const hasServiceTarget = (api: ApiDefinition): boolean => api.proxy.upstreams.targets.some((t) => isServiceTarget(t.target));

/**
 * Refuses a Service target this control plane cannot resolve: `watch` null = no Kubernetes client.
 * Field names as the admin API shows them.
 */
export function checkServiceTargets(api: ApiDefinition, watch: Pick<EndpointWatch, 'namespaces'> | null): void {
  api.proxy.upstreams.targets.forEach((t, i) => {
    if (!isServiceTarget(t.target)) return;
    const field = `proxy.upstreams.targets[${i}].target`;
    if (!watch) throw fieldError(field, 'names a Kubernetes Service: service discovery needs the control plane to run with STORE=kubernetes');
    const namespace = serviceOf(t.target).service.namespace ?? watch.namespaces[0];
    if (!watch.namespaces.includes(namespace)) {
      throw fieldError(
        field,
        `names namespace "${namespace}", where this control plane does not discover Services (${watch.namespaces.join(', ')}; see DISCOVERY_NAMESPACES)`,
      );
    }
  });
}

const hostOf = (ip: string) => (ip.includes(':') ? `[${ip}]` : ip);

export function serveServiceTargets(store: Pick<DefinitionStore, 'current' | 'subscribe'>, watch: EndpointWatch | null, logger: Logger): ServedDefinitions {
  const listeners = new Set<StoreListener>();
  /** APIs with a Service target, as the store holds them and as expanded. */
  const sources = new Map<string, ApiDefinition>();
  const expanded = new Map<string, ApiDefinition>();
  /** `namespace/service` → names of the APIs naming it. */
  const byService = new Map<string, Set<string>>();
  const versions = new Map<number, number>();
  const firstVersions = new Map<number, number>();
  const pending = new Set<string>();
  let stored = store.current();
  let routeApis: readonly ApiDefinition[] = [];
  let routeNames = new Set<string>();
  let gatewayTls: readonly GatewayListenerTls[] | undefined;
  let bumps = 0;
  let served: StoreState = stored;

  /**
   * The store's APIs name the namespaces the control plane discovers in (checked on write); a Gateway API route's
   * may name any: the Gateway API part allowed it (its own namespace, or a ReferenceGrant).
   */
  const discoverable = (name: string, namespace: string) => watch!.namespaces.includes(namespace) || routeNames.has(name);

  function refsOf(api: ApiDefinition): string[] {
    return api.proxy.upstreams.targets
      .filter((t) => isServiceTarget(t.target))
      .map((t) => {
        const { service } = serviceOf(t.target);
        return `${service.namespace ?? watch?.namespaces[0] ?? ''}/${service.name}`;
      });
  }

  function expand(api: ApiDefinition): ApiDefinition {
    const targets: ApiDefinition['proxy']['upstreams']['targets'] = [];
    for (const t of api.proxy.upstreams.targets) {
      if (!isServiceTarget(t.target)) {
        targets.push(t);
        continue;
      }
      const { scheme, path, service } = serviceOf(t.target);
      const namespace = service.namespace ?? watch?.namespaces[0] ?? '';
      if (!watch || !discoverable(api.name, namespace)) continue;
      for (const { ip, port } of watch.endpoints(namespace, service)) targets.push({ ...t, target: `${scheme}://${hostOf(ip)}:${port}${path}` });
    }
    return targets.length === 0 ? api : { ...api, proxy: { ...api.proxy, upstreams: { ...api.proxy.upstreams, targets } } };
  }

  function put(name: string, api: ApiDefinition | undefined): void {
    const before = sources.get(name);
    if (before) for (const key of refsOf(before)) byService.get(key)?.delete(name);
    sources.delete(name);
    expanded.delete(name);
    if (!api || !hasServiceTarget(api)) return;
    sources.set(name, api);
    for (const key of refsOf(api)) {
      let names = byService.get(key);
      if (!names) byService.set(key, (names = new Set()));
      names.add(name);
      const namespace = key.slice(0, key.indexOf('/'));
      if (watch && discoverable(name, namespace)) watch.watch(namespace);
    }
    expanded.set(name, expand(api));
  }

  /** `endpoints`: an endpoint or route change, which makes a version only when it changes what is served. */
  function publish(endpoints = false): boolean {
    const storeNames = routeApis.length === 0 ? null : new Set(stored.defs.apis.map((a) => a.name));
    const routes = storeNames ? routeApis.filter((a) => !storeNames.has(a.name)) : [];
    const defs =
      sources.size === 0 && routes.length === 0
        ? stored.defs
        : { ...stored.defs, apis: [...stored.defs.apis, ...routes].map((a) => expanded.get(a.name) ?? a) };
    const hash = defs === stored.defs ? stored.hash : definitionsHash(defs);
    if (endpoints && hash === served.hash && sameGatewayTls(gatewayTls, served.gatewayTls)) return false;
    if (endpoints) bumps++;
    served = bumps === 0 && defs === stored.defs && !gatewayTls ? stored : { revision: stored.revision + bumps, defs, hash, ...(gatewayTls && { gatewayTls }) };
    versions.set(served.revision, stored.revision);
    if (!firstVersions.has(stored.revision)) firstVersions.set(stored.revision, served.revision);
    for (const kept of [versions, firstVersions]) if (kept.size > VERSIONS_KEPT) kept.delete(kept.keys().next().value!);
    for (const listener of listeners) listener(served);
    return true;
  }

  function storeChanged(state: StoreState): void {
    const previous = stored;
    stored = state;
    const edits = editsFrom(previous.defs, state.defs);
    if (edits) {
      for (const { kind, before, after } of edits) {
        if (kind !== 'api') continue;
        if (before && (before as ApiDefinition).name !== (after as ApiDefinition | undefined)?.name) put((before as ApiDefinition).name, undefined);
        if (after) put((after as ApiDefinition).name, after as ApiDefinition);
      }
    } else {
      // Compared whole (a config import, the Kubernetes store's full pass): only APIs that name or named a Service.
      const now = new Map(state.defs.apis.filter(hasServiceTarget).map((a) => [a.name, a]));
      for (const name of sources.keys())
        if (!now.has(name) && !routeApis.some((a) => a.name === name))
          put(
            name,
            state.defs.apis.find((a) => a.name === name),
          );
      for (const [name, api] of now) if (sources.get(name) !== api) put(name, api);
    }
    publish();
  }

  // Seeded from the store's content at start, so the first snapshot already holds the endpoints known then.
  for (const api of stored.defs.apis) if (hasServiceTarget(api)) put(api.name, api);
  if (sources.size > 0) publish();
  const unsubscribe = store.subscribe(storeChanged);

  return {
    current: () => served,
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    endpointsChanged(namespace, service) {
      // An informer's list delivers every object at once: one re-expansion per turn.
      if (pending.size === 0) {
        setImmediate(() => {
          const apis = new Set([...pending].flatMap((key) => [...(byService.get(key) ?? [])]));
          pending.clear();
          for (const name of apis) expanded.set(name, expand(sources.get(name)!));
          if (apis.size > 0 && publish(true)) logger.info({ apis: apis.size, version: served.revision }, 'service endpoints changed');
        });
      }
      pending.add(`${namespace}/${service}`);
    },
    setRouteApis(apis) {
      // A definition held already (the same object) keeps its expansion, which endpointsChanged keeps current.
      const next = new Map(apis.map((a) => [a.name, a]));
      const held = (api: ApiDefinition) => next.get(api.name) === api && sources.get(api.name) === api;
      for (const api of routeApis) if (!held(api)) put(api.name, undefined);
      routeApis = apis;
      routeNames = new Set(next.keys());
      for (const api of apis) if (!held(api)) put(api.name, api);
      publish(true);
    },
    setGatewayTls(listeners) {
      gatewayTls = canonicalGatewayTls(listeners);
      if (publish(true)) logger.info({ listeners: gatewayTls?.length ?? 0, version: served.revision }, 'Gateway HTTPS listeners changed');
    },
    storeRevisionOf: (version) => versions.get(version) ?? version,
    versionOf: (revision) => firstVersions.get(revision) ?? revision + bumps,
    close() {
      unsubscribe();
      listeners.clear();
    },
  };
}
