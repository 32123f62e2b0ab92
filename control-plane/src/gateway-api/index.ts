/**
 * Gateway API (docs/kubernetes.md "Gateway API"): informers, in every namespace, on the GatewayClasses whose
 * controllerName is ours, their Gateways, the HTTPRoutes and GRPCRoutes attached to them, ReferenceGrants, Services
 * and Namespaces (for allowedRoutes selectors); every change re-translates
 * the routes (translate.ts) into definitions served in memory next to the store's (setRouteApis), never
 * written into the store. The leader writes GatewayClass, Gateway and route status.
 *
 * A translated definition the data planes could not compile with the rest (a bad value, or a route the
 * store's APIs or an older HTTPRoute already hold) is left out with its route's Accepted False, so one
 * route never makes a data plane NACK the whole snapshot.
 */
import {
  CoreV1Api,
  CustomObjectsApi,
  makeInformer,
  type Informer,
  type KubeConfig,
  type KubernetesObject,
  type ObjectCache,
  type V1Service,
} from '@kubernetes/client-node';
import { compileDefinitions, createCompileCache } from '#proto/compile/index';
import { parseApiDefinition, type ApiDefinition } from '#proto/definition/index';
import type { Logger } from '#proto/logger';
import type { DefinitionStore } from '../store/index.js';
import { runInformer } from '../store/kubernetes/run-informer.js';
import {
  allows,
  certificateRefsProblem,
  GROUP,
  listenerKinds,
  referenceGranted,
  translateRoute,
  type Condition,
  type GatewayObject,
  type GRPCRouteObject,
  type HTTPRouteObject,
  type ReferenceGrantObject,
  type RouteKind,
  type TlsSecret,
} from './translate.js';
const VERSION = 'v1';
const RETRY_BASE_MS = 1000;
const RETRY_MAX_MS = 10_000;
/**
 * The conformance features (Gateway API's names, sorted as the field asks) a GatewayClass of ours declares in
 * `status.supportedFeatures`: the core ones of what is served, and the extended ones the suite passes (docs/conformance).
 */
const SUPPORTED_FEATURES = ['GRPCRoute', 'Gateway', 'HTTPRoute', 'HTTPRoutePathRewrite', 'HTTPRouteResponseHeaderModification', 'ReferenceGrant'];
/** Status is looked at again this often: a new leader writes what its predecessor had not. */
const RESYNC_MS = 10_000;

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
  served: { setRouteApis(apis: readonly ApiDefinition[]): void };
  isLeader(): boolean;
  logger: Logger;
}): GatewayApi {
  const { kubeConfig, namespace, controllerName, logger } = deps;
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const timers = new Set<NodeJS.Timeout>();
  const cache = createCompileCache();
  let closed = false;
  let scheduled = false;
  let running: Promise<void> | null = null;

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
    const attached = new Map<string, number>(); // `namespace/gateway/listener` → routes
    const grantList = grants.list() as unknown as ReferenceGrantObject[];
    const labelsOf = (ns: string) =>
      (namespaces.get(ns) as { metadata?: { labels?: Record<string, string> } } | undefined)?.metadata?.labels ?? (namespaces.get(ns) ? {} : undefined);
    type Verdict = { route: HTTPRouteObject | GRPCRouteObject; kind: RouteKind; parents: Array<{ ref: object; accepted: Condition; resolvedRefs: Condition }> };
    const verdicts: Verdict[] = [];
    const candidates: Array<{ api: ApiDefinition; verdict: Verdict }> = [];
    const serviceExists = (ns: string, name: string) => services.get(name, ns) !== undefined;
    // Oldest first: of two routes that want the same match, the older keeps it (Gateway API's tie rule).
    const sorted = [
      ...(routes.list() as unknown as HTTPRouteObject[]).map((route) => ({ route, kind: 'HTTPRoute' as const })),
      ...(grpcRoutes.list() as unknown as GRPCRouteObject[]).map((route) => ({ route, kind: 'GRPCRoute' as const })),
    ].sort(
      ({ route: a }, { route: b }) =>
        String(a.metadata.creationTimestamp ?? '').localeCompare(String(b.metadata.creationTimestamp ?? '')) ||
        `${a.metadata.namespace}/${a.metadata.name}`.localeCompare(`${b.metadata.namespace}/${b.metadata.name}`),
    );
    for (const { route, kind } of sorted) {
      const routeNs = route.metadata.namespace;
      const gatewayOf = (p: { name: string; namespace?: string }) =>
        gws.find((g) => g.metadata.name === p.name && g.metadata.namespace === (p.namespace ?? routeNs));
      const refs = (route.spec.parentRefs ?? []).filter((p) => (p.group ?? GROUP) === GROUP && (p.kind ?? 'Gateway') === 'Gateway' && gatewayOf(p));
      if (refs.length === 0) continue;
      const verdict: Verdict = { route, kind, parents: [] };
      verdicts.push(verdict);
      const hosts: Array<string | undefined> = [];
      const listenersOf = refs.map((ref) => {
        const gw = gatewayOf(ref)!;
        // sectionName and port pick listeners; none picked is NoMatchingParent, none of those admitting it NotAllowedByListeners.
        const named = (gw.spec.listeners ?? []).filter(
          (l) => (!ref.sectionName || l.name === ref.sectionName) && (ref.port === undefined || l.port === ref.port),
        );
        const listeners = named.filter((l) => allows(l, kind, routeNs, gw.metadata.namespace, labelsOf));
        hosts.push(...listeners.map((l) => l.hostname));
        return { ref, gw, named, listeners };
      });
      const translated = translateRoute(route, hosts, serviceExists, kind, (to, name) => referenceGranted(grantList, kind, routeNs, to, name));
      for (const { ref, gw, named, listeners } of listenersOf) {
        const which = [ref.sectionName && `named ${ref.sectionName}`, ref.port !== undefined && `on port ${ref.port}`].filter(Boolean).join(' ');
        const accepted: Condition =
          named.length === 0
            ? { type: 'Accepted', status: 'False', reason: 'NoMatchingParent', message: `Gateway ${gw.metadata.name} has no listener ${which}` }
            : listeners.length === 0
              ? {
                  type: 'Accepted',
                  status: 'False',
                  reason: 'NotAllowedByListeners',
                  message: `no HTTP or HTTPS listener${which ? ` ${which}` : ''} on Gateway ${gw.metadata.name} allows a ${kind} from this namespace`,
                }
              : translated.accepted;
        verdict.parents.push({ ref, accepted, resolvedRefs: translated.resolvedRefs });
        const key = (l: { name: string }) => `${gw.metadata.namespace}/${gw.metadata.name}/${l.name}`;
        if (accepted.status === 'True') for (const l of listeners) attached.set(key(l), (attached.get(key(l)) ?? 0) + 1);
      }
      if (!verdict.parents.some((p) => p.accepted.status === 'True')) continue;
      try {
        for (const raw of translated.apis) candidates.push({ api: parseApiDefinition(raw), verdict });
      } catch (err) {
        refuse(verdict, `translated definition refused: ${(err as Error).message}`);
      }
    }
    // The data planes compile the whole snapshot: what would not compile with the store's content is left out here.
    const live = candidates.filter((c) => c.verdict.parents.some((p) => p.accepted.status === 'True'));
    if (live.length > 0) {
      const stored = deps.store.current().defs;
      const order = new Map(live.map((c, i) => [c.api.name, i + 1]));
      const compiled = compileDefinitions(
        { ...stored, apis: [...stored.apis, ...live.map((c) => c.api)] },
        // The store's definitions first, then the routes oldest first.
        { cache, rank: (_kind, name) => order.get(name) ?? 0 },
      );
      for (const rejection of compiled.rejected) {
        const candidate = order.has(rejection.name) ? live[order.get(rejection.name)! - 1] : undefined;
        if (candidate) refuse(candidate.verdict, `definition ${rejection.name}: ${rejection.error.message}`);
      }
    }
    const served = candidates.filter((c) => c.verdict.parents.some((p) => p.accepted.status === 'True'));
    deps.served.setRouteApis(served.map((c) => c.api));
    if (!deps.isLeader()) return;
    await writeStatuses(ours, gws, verdicts, attached, await certificateSecrets(gws, grantList), grantList);
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
          found.set(key, (await core.readNamespacedSecret({ name, namespace: ns })) as TlsSecret);
        } catch (err) {
          if ((err as { code?: number }).code !== 404)
            logger.warn({ err: String((err as Error)?.message ?? err).slice(0, 300), secret: key }, 'Gateway API: certificateRef Secret read failed');
        }
      }),
    );
    return found;
  }

  function refuse(verdict: { parents: Array<{ accepted: Condition }> }, message: string): void {
    for (const p of verdict.parents)
      if (p.accepted.status === 'True') p.accepted = { type: 'Accepted', status: 'False', reason: 'UnsupportedValue', message: message.slice(0, 1000) };
  }

  async function writeStatuses(
    ours: GatewayClassObject[],
    gws: GatewayObject[],
    verdicts: Array<{
      route: HTTPRouteObject | GRPCRouteObject;
      kind: RouteKind;
      parents: Array<{ ref: object; accepted: Condition; resolvedRefs: Condition }>;
    }>,
    attached: Map<string, number>,
    secrets: Map<string, TlsSecret>,
    grantList: ReferenceGrantObject[],
  ): Promise<void> {
    const writes: Array<Promise<void>> = [];
    for (const c of ours) {
      const conditions = [cond(c.metadata.generation, { type: 'Accepted', status: 'True', reason: 'Accepted', message: `accepted by ${controllerName}` })];
      writes.push(put('gatewayclasses', c as never, { conditions, supportedFeatures: SUPPORTED_FEATURES.map((name) => ({ name })) }, true));
    }
    for (const gw of gws) {
      const listeners = (gw.spec.listeners ?? []).map((l) => {
        const http = l.protocol === 'HTTP' || l.protocol === 'HTTPS';
        const { kinds, invalid } = listenerKinds(l);
        const certificates = certificateRefsProblem(l, gw.metadata.namespace, grantList, (ns, name) => secrets.get(`${ns}/${name}`));
        const resolved: Condition = certificates
          ? { type: 'ResolvedRefs', status: 'False', ...certificates }
          : invalid.length
            ? { type: 'ResolvedRefs', status: 'False', reason: 'InvalidRouteKinds', message: `allowedRoutes.kinds not supported: ${invalid.join(', ')}` }
            : ok('ResolvedRefs');
        return {
          name: l.name,
          supportedKinds: kinds.map((kind) => ({ group: GROUP, kind })),
          attachedRoutes: attached.get(`${gw.metadata.namespace}/${gw.metadata.name}/${l.name}`) ?? 0,
          conditions: [
            cond(
              gw.metadata.generation,
              http
                ? ok('Accepted')
                : {
                    type: 'Accepted',
                    status: 'False',
                    reason: 'UnsupportedProtocol',
                    message: `protocol ${l.protocol} is not supported (HTTPRoute and GRPCRoute only)`,
                  },
            ),
            cond(
              gw.metadata.generation,
              http && !certificates
                ? ok('Programmed')
                : {
                    type: 'Programmed',
                    status: 'False',
                    reason: 'Invalid',
                    message: certificates ? 'certificateRefs do not resolve' : 'listener not accepted',
                  },
            ),
            cond(gw.metadata.generation, resolved),
          ],
        };
      });
      const conditions = [
        cond(gw.metadata.generation, ok('Accepted')),
        cond(gw.metadata.generation, {
          ...ok('Programmed'),
          message: "served by the data planes' own listeners (a Gateway's addresses and ports do not configure them)",
        }),
      ];
      const addresses = gatewayAddresses();
      writes.push(put('gateways', gw as never, { ...(addresses.length && { addresses }), conditions, listeners }, false));
    }
    for (const { route, kind, parents } of verdicts) {
      const held = ((route as { status?: { parents?: Array<{ controllerName?: string }> } }).status?.parents ?? []).filter(
        (p) => p.controllerName !== controllerName,
      );
      const mine = parents.map((p) => ({
        parentRef: p.ref,
        controllerName,
        conditions: [cond(route.metadata.generation, p.accepted), cond(route.metadata.generation, p.resolvedRefs)],
      }));
      writes.push(put(PLURAL[kind], route as never, { parents: [...held, ...mine] }, false));
    }
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

  const ok = (type: string): Condition => ({ type: type as Condition['type'], status: 'True', reason: type, message: type });
  const cond = (generation: number | undefined, c: Condition) => ({ ...c, observedGeneration: generation ?? 0, lastTransitionTime: '' });

  /** Writes `status` unless it already holds (lastTransitionTime kept from a condition that did not change). */
  async function put(plural: string, obj: Obj & { status?: Record<string, unknown> }, status: Record<string, unknown>, clustered: boolean): Promise<void> {
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const before = canonical(obj.status ?? {});
    const held = new Map<string, string>();
    const collect = (value: unknown): void => {
      if (Array.isArray(value)) value.forEach(collect);
      else if (value && typeof value === 'object') {
        const c = value as Record<string, unknown>;
        if (typeof c.lastTransitionTime === 'string' && typeof c.type === 'string')
          held.set(`${c.type}|${c.status}|${c.reason}|${c.message}|${c.observedGeneration}`, c.lastTransitionTime);
        Object.values(c).forEach(collect);
      }
    };
    collect(obj.status);
    const stamp = (value: unknown): unknown => {
      if (Array.isArray(value)) return value.map(stamp);
      if (!value || typeof value !== 'object') return value;
      const c = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, stamp(v)]));
      if (c.lastTransitionTime === '') c.lastTransitionTime = held.get(`${c.type}|${c.status}|${c.reason}|${c.message}|${c.observedGeneration}`) ?? now;
      return c;
    };
    const next = stamp(status) as Record<string, unknown>;
    if (canonical(next) === before) return;
    const body = { ...obj, status: next };
    const name = obj.metadata!.name!;
    try {
      if (clustered) await custom.replaceClusterCustomObjectStatus({ group: GROUP, version: VERSION, plural, name, body });
      else await custom.replaceNamespacedCustomObjectStatus({ group: GROUP, version: VERSION, namespace: obj.metadata!.namespace!, plural, name, body });
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

/** JSON with sorted keys: the apiserver need not keep the order status was written in. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v,
  );
