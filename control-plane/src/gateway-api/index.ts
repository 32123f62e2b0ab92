/**
 * Gateway API (docs/kubernetes.md "Gateway API"): informers, in every namespace, on the GatewayClasses whose
 * controllerName is ours, their Gateways, the HTTPRoutes and GRPCRoutes attached to them, ReferenceGrants, Services
 * and Namespaces (for allowedRoutes selectors); every change re-translates
 * the routes (translate.ts) into definitions served in memory next to the store's (setRouteApis), never
 * written into the store, and the HTTPS listeners' certificates (setGatewayTls) into the snapshot. The leader
 * writes GatewayClass, Gateway and route status.
 *
 * A translated definition the data planes could not compile with the rest (a bad value, or a route the
 * store's APIs or an older HTTPRoute already hold) is left out with its route's Accepted False, so one
 * route never makes a data plane NACK the whole snapshot.
 */
import { CoreV1Api, makeInformer, type Informer, type KubeConfig, type KubernetesObject, type ObjectCache, type V1Service } from '@kubernetes/client-node';
import { createCompileCache } from '#proto/compile/index';
import type { ApiDefinition } from '#proto/definition/index';
import type { Logger } from '#proto/logger';
import type { GatewayListenerTls } from '#proto/snapshot/codec';
import type { DefinitionStore } from '../store/index.js';
import { createRateLimiter, customObjectsApi, kubernetesApi, statusWriter, type RateLimit } from '../store/kubernetes/api-client.js';
import { runInformer } from '../store/kubernetes/run-informer.js';
import { gatewayClassStatus, gatewayStatus, restamped, routeStatus } from './status.js';
import {
  certificateRefsProblem,
  gatewayListenersTls,
  GROUP,
  type GatewayObject,
  type GRPCRouteObject,
  type HTTPRouteObject,
  type Listener,
  type ReferenceGrantObject,
  type RouteKind,
  type TlsSecret,
} from './translate.js';
import { judgeRoutes, oldestFirst, refuseUncompilable, type ParsedApis, type Verdict } from './verdicts.js';
const VERSION = 'v1';
const RETRY_BASE_MS = 1000;
const RETRY_MAX_MS = 10_000;
/** Status is looked at again this often: a new leader writes what its predecessor had not. */
const RESYNC_MS = 10_000;
/** Per apiserver request, as the store's (a list of every route in the cluster included). */
const REQUEST_TIMEOUT_MS = 30_000;

interface GatewayClassObject {
  metadata: { name: string; generation?: number };
  spec: { controllerName: string };
}
type Obj = KubernetesObject & { spec?: unknown; status?: Record<string, unknown> };
type Cached = Informer<Obj> & ObjectCache<Obj>;

export interface GatewayApi {
  close(): void;
}

export function startGatewayApi(deps: {
  kubeConfig: KubeConfig;
  namespace: string;
  controllerName: string;
  /** The data planes' Service in `namespace` whose addresses Gateways get in `status.addresses` (GATEWAY_ADDRESS_SERVICE); null: none written. */
  addressService: string | null;
  store: Pick<DefinitionStore, 'current' | 'subscribe'>;
  served: { setRouteApis(apis: readonly ApiDefinition[]): void; setGatewayTls(listeners: readonly GatewayListenerTls[]): void };
  isLeader(): boolean;
  /** KUBE_API_QPS / KUBE_API_BURST, a bucket of its own beside the store's. */
  rateLimit?: RateLimit;
  logger: Logger;
}): GatewayApi {
  const { kubeConfig, namespace, controllerName, logger } = deps;
  // The store's client (api-client.ts): kept-alive connections, a timeout, the client-side rate limit. client-node's own
  // opened a TLS connection for every status write: a third of the CP's busy time at 1,000 routes (bench:kubernetes).
  const limiter = deps.rateLimit && createRateLimiter(deps.rateLimit);
  const custom = customObjectsApi(kubeConfig, REQUEST_TIMEOUT_MS, limiter);
  const core = kubernetesApi(kubeConfig, REQUEST_TIMEOUT_MS, CoreV1Api, limiter);
  const writeStatus = statusWriter(kubeConfig, REQUEST_TIMEOUT_MS, limiter);
  const timers = new Set<NodeJS.Timeout>();
  // Verdicts only (refuseUncompilable): no compiled routes kept, as the store's cache (store/compile-cache.ts).
  const cache = createCompileCache({ keepRoutes: false });
  let closed = false;
  let scheduled = false;
  let running: Promise<void> | null = null;
  /** The certificateRef Secrets of the last reconcile (type and data only), by `namespace/name`. */
  let secretsRead = new Map<string, TlsSecret>();
  let parsed: ParsedApis = new Map();

  /** Every namespace's objects: Gateways and routes may be in any (allowedRoutes and ReferenceGrants say who may attach or refer). */
  function informer(plural: string, version = VERSION): Cached {
    const list = () => custom.listClusterCustomObject({ group: GROUP, version, plural }) as never;
    return run(makeInformer<Obj>(kubeConfig, `/apis/${GROUP}/${version}/${plural}`, list), plural);
  }

  function run(inf: Cached, what: string): Cached {
    const failed = (err: unknown, retryMs: number) => {
      const message = String((err as Error)?.message ?? err).slice(0, 300);
      const missing = (err as { code?: number }).code === 404 || /HTTP-Code: 404|not found/i.test(message);
      // Our own CRDs keep being served: only the Gateway API part waits for its CRDs.
      logger.error(
        { err: message, resource: what, retryMs },
        missing
          ? `Gateway API: ${what} cannot be listed: are the Gateway API CRDs (gateway.networking.k8s.io/v1) installed? Retrying`
          : `Gateway API: ${what} list/watch failed; retrying`,
      );
    };
    void runInformer(inf, schedule, { baseMs: RETRY_BASE_MS, maxMs: RETRY_MAX_MS, timers, closed: () => closed, failed });
    return inf;
  }

  const classes = informer('gatewayclasses');
  const gateways = informer('gateways');
  const routes = informer('httproutes');
  const grpcRoutes = informer('grpcroutes');
  const grants = informer('referencegrants', 'v1beta1');
  const PLURAL: Record<RouteKind, string> = { HTTPRoute: 'httproutes', GRPCRoute: 'grpcroutes' };
  const services = run(
    makeInformer<Obj>(kubeConfig, '/api/v1/services', () => core.listServiceForAllNamespaces() as never),
    'services',
  ) as unknown as Informer<V1Service> & ObjectCache<V1Service>;
  // allowedRoutes.namespaces.from Selector selects on the route namespace's labels.
  const namespaces = run(
    makeInformer<Obj>(kubeConfig, '/api/v1/namespaces', () => core.listNamespace() as never),
    'namespaces',
  );
  const unsubscribe = deps.store.subscribe(schedule);
  const resync = setInterval(schedule, RESYNC_MS);

  function schedule(): void {
    if (scheduled || closed) return;
    scheduled = true;
    // One reconcile at a time: status writes of two would race on the same resourceVersions.
    setImmediate(async () => {
      await running;
      scheduled = false;
      if (closed) return;
      running = reconcile().catch((err: unknown) => logger.warn({ err }, 'Gateway API: reconcile failed'));
    });
  }

  async function reconcile(): Promise<void> {
    const ours = (classes.list() as unknown as GatewayClassObject[]).filter((c) => c.spec?.controllerName === controllerName);
    const classNames = new Set(ours.map((c) => c.metadata.name));
    const gws = (gateways.list() as unknown as GatewayObject[]).filter((g) => classNames.has(g.spec.gatewayClassName));
    const labelsOf = (ns: string) =>
      (namespaces.get(ns) as { metadata?: { labels?: Record<string, string> } } | undefined)?.metadata?.labels ?? (namespaces.get(ns) ? {} : undefined);
    const sorted = oldestFirst(routes.list() as unknown as HTTPRouteObject[], grpcRoutes.list() as unknown as GRPCRouteObject[]);
    const grantList = grants.list() as unknown as ReferenceGrantObject[];
    const judged = judgeRoutes(sorted, gws, { grants: grantList, labelsOf, serviceExists: (ns, name) => services.get(name, ns) !== undefined }, parsed);
    const { verdicts, candidates, attached } = judged;
    parsed = judged.parsed;
    refuseUncompilable(candidates, () => deps.store.current().defs, cache);
    const served = candidates.filter((c) => c.verdict.parents.some((p) => p.accepted.status === 'True'));
    deps.served.setRouteApis(served.map((c) => c.api));
    // Every replica serves the HTTPS listeners; their Secrets are read again at every reconcile (the resync too),
    // so a rotated certificate reaches the data planes within RESYNC_MS without a watch on Secrets.
    const secrets = await certificateSecrets(gws, grantList);
    if (closed) return;
    deps.served.setGatewayTls(gatewayListenersTls(gws, grantList, (ns, name) => secrets.get(`${ns}/${name}`)));
    if (!deps.isLeader()) return;
    await writeStatuses(ours, gws, verdicts, attached, secrets, grantList);
  }

  /**
   * The Secrets the HTTPS listeners of `gws` name and may read (core Secrets, same namespace or granted), read
   * one by one (`get`, never listed: the CP holds no other Secret of the cluster); absent ones are missing.
   */
  async function certificateSecrets(gws: GatewayObject[], grantList: ReferenceGrantObject[]): Promise<Map<string, TlsSecret>> {
    const wanted = new Set<string>();
    for (const gw of gws)
      for (const l of gw.spec.listeners ?? [])
        certificateRefsProblem(l, gw.metadata.namespace, grantList, (ns, name) => {
          wanted.add(`${ns}/${name}`);
          return undefined;
        });
    const found = new Map<string, TlsSecret>();
    await Promise.all(
      [...wanted].map(async (key) => {
        const [ns, name] = key.split('/') as [string, string];
        try {
          const { type, data, metadata } = (await core.readNamespacedSecret({ name, namespace: ns })) as TlsSecret & {
            metadata?: { resourceVersion?: string };
          };
          const held = secretsRead.get(key);
          const resourceVersion = metadata?.resourceVersion;
          found.set(key, held && resourceVersion !== undefined && held.resourceVersion === resourceVersion ? held : { type, data, resourceVersion });
        } catch (err) {
          if ((err as { code?: number }).code === 404) return;
          // A failed read (not a missing Secret) keeps the last one read: the data planes keep serving its certificate.
          const held = secretsRead.get(key);
          if (held) found.set(key, held);
          logger.warn({ err: String((err as Error)?.message ?? err).slice(0, 300), secret: key }, 'Gateway API: certificateRef Secret read failed');
        }
      }),
    );
    secretsRead = found;
    return found;
  }

  async function writeStatuses(
    ours: GatewayClassObject[],
    gws: GatewayObject[],
    verdicts: Verdict[],
    attached: Map<string, number>,
    secrets: Map<string, TlsSecret>,
    grantList: ReferenceGrantObject[],
  ): Promise<void> {
    const writes: Array<Promise<void>> = [];
    for (const c of ours) writes.push(put('gatewayclasses', c as never, gatewayClassStatus(c.metadata.generation, controllerName), true));
    for (const gw of gws) {
      const certificates = (l: Listener) => certificateRefsProblem(l, gw.metadata.namespace, grantList, (ns, name) => secrets.get(`${ns}/${name}`));
      writes.push(put('gateways', gw as never, gatewayStatus(gw, attached, gatewayAddresses(), certificates), false));
    }
    for (const verdict of verdicts) writes.push(put(PLURAL[verdict.kind], verdict.route as never, routeStatus(verdict, controllerName), false));
    await Promise.all(writes);
  }

  /** The data planes' Service's addresses: its load balancer's, else its external IPs, else its cluster IPs. */
  function gatewayAddresses(): Array<{ type: 'IPAddress' | 'Hostname'; value: string }> {
    const svc = deps.addressService ? services.get(deps.addressService, namespace) : undefined;
    if (!svc) return [];
    const ip = (value: string) => ({ type: 'IPAddress' as const, value });
    const ingress = (svc.status?.loadBalancer?.ingress ?? [])
      .map((i) => (i.ip ? ip(i.ip) : { type: 'Hostname' as const, value: i.hostname ?? '' }))
      .filter((a) => a.value);
    if (ingress.length) return ingress;
    if (svc.spec?.externalIPs?.length) return svc.spec.externalIPs.map(ip);
    return (svc.spec?.clusterIPs ?? (svc.spec?.clusterIP ? [svc.spec.clusterIP] : [])).filter((c) => c !== 'None').map(ip);
  }

  /**
   * Per informer object (replaced, never changed, when the object changes), the status last found held by it: every
   * reconcile looks at every route, and comparing each route's status again (restamped) was most of a reconcile at 1,000 routes.
   */
  const held = new WeakMap<object, string>();

  /** Writes `status` unless it already holds (lastTransitionTime kept from a condition that did not change). */
  async function put(plural: string, obj: Obj & { status?: Record<string, unknown> }, status: Record<string, unknown>, clustered: boolean): Promise<void> {
    const wanted = JSON.stringify(status);
    if (held.get(obj) === wanted) return;
    const next = restamped(obj.status, status);
    if (next === null) {
      held.set(obj, wanted);
      return;
    }
    const name = obj.metadata!.name!;
    try {
      await writeStatus({ group: GROUP, version: VERSION, plural, name, namespace: clustered ? undefined : obj.metadata!.namespace! }, obj, next);
    } catch (err) {
      // A conflict means a newer object, whose event reconciles again.
      logger.warn({ err, resource: plural, name }, 'Gateway API: status write failed');
    }
  }

  return {
    close() {
      closed = true;
      clearInterval(resync);
      unsubscribe();
      for (const timer of timers) clearTimeout(timer);
      for (const inf of [classes, gateways, routes, grpcRoutes, grants, services, namespaces]) void inf.stop();
    },
  };
}
