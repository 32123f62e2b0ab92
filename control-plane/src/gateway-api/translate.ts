/**
 * Gateway API HTTPRoute → API definitions (docs/kubernetes.md "Gateway API"): one definition per rule × match, named
 * `httproute.<namespace>.<name>.<rule>.<match>`, served in memory next to the store's. Pure: the caller
 * (index.ts) gives the route, the Gateways it may attach to and which Services exist.
 *
 * | HTTPRoute                                    | API definition                                              |
 * |----------------------------------------------|-------------------------------------------------------------|
 * | `hostnames`                                  | `hosts` (those a listener's `hostname` admits; none = the listener's) |
 * | (every definition)                           | `preserve_host: true`: the upstream gets the client's Host      |
 * | `path` PathPrefix `/foo` (or `/foo/`)        | `listen_path: /foo/*` (`/` → `/*`)                          |
 * | `path` Exact `/foo`                          | `listen_path: /foo`                                         |
 * | `path` RegularExpression                     | refused: Accepted False UnsupportedValue                    |
 * | `headers` Exact                              | `match_headers` (one value each)                            |
 * | `headers` RegularExpression, `queryParams`   | refused: Accepted False UnsupportedValue                    |
 * | `method`                                     | `methods: [method]`                                         |
 * | `backendRefs` Service, port, weight          | `k8s://<svc>.<ns>:<port>` targets, balancing `weight`; weight 0 left out |
 * | backendRef in another namespace              | a ReferenceGrant there must allow it, else left out: ResolvedRefs False RefNotPermitted |
 * | backendRef of another kind                   | refused: ResolvedRefs False InvalidKind                     |
 * | backendRef to a missing Service              | left out: ResolvedRefs False BackendNotFound                |
 * | a rule with no backend left (and no redirect) | `request_termination` 500 (plain text; a GRPCRoute's: its message) |
 * | `RequestHeaderModifier` set/add/remove       | `request_transformer` replace+add / append / remove         |
 * | `ResponseHeaderModifier` set/add/remove      | `response_transformer` replace+add / append / remove        |
 * | `RequestRedirect`                            | `redirect` (scheme, hostname, port, statusCode, path ReplaceFullPath / ReplacePrefixMatch) |
 * | `URLRewrite` ReplacePrefixMatch `/bar` on PathPrefix `/foo` | `strip_path` + target path `/bar`: `/foo/x` → `/bar/x`, `/foo` → `/bar` |
 * | `URLRewrite` ReplaceFullPath `/bar`          | target path `/bar`, `strip_path` off: every path → `/bar` (a target path is the whole path) |
 * | `URLRewrite` hostname, `RequestMirror`, `CORS`, `ExtensionRef` | refused: Accepted False UnsupportedValue |
 *
 * Set is "replace when present, else add": `request_transformer`'s `replace` + `add` of the same header.
 *
 * A GRPCRoute (definitions `grpcroute.<namespace>.<name>.<rule>.<match>`) is read as the HTTPRoute it means, then
 * every definition gets `methods: ["POST"]` and `upstreams.protocol: "http2"`:
 *
 * | GRPCRoute                                    | As the HTTPRoute                                            |
 * |----------------------------------------------|-------------------------------------------------------------|
 * | `method` Exact `{service, method}`           | path Exact `/<service>/<method>`                            |
 * | `method` Exact `{service}`                   | path PathPrefix `/<service>` (`/<service>/*`)               |
 * | no match                                     | path PathPrefix `/`                                         |
 * | `method` Exact `{method}` without service    | refused: a listen_path has no "any segment, then this one" |
 * | `method` RegularExpression                   | refused: Accepted False UnsupportedValue                    |
 * | `headers`, `backendRefs`, `hostnames`        | as the HTTPRoute's                                          |
 * | `RequestHeaderModifier`, `ResponseHeaderModifier` | as the HTTPRoute's                                     |
 * | `RequestMirror`, `ExtensionRef`              | refused: Accepted False UnsupportedValue                    |
 */
import { createHash, createPrivateKey, X509Certificate } from 'node:crypto';
import { tlsContextOf, type GatewayListenerTls } from '#proto/snapshot/codec';

export const GROUP = 'gateway.networking.k8s.io';

/** The parts of Gateway API objects read here (gateway.networking.k8s.io/v1). */
export interface GatewayObject {
  metadata: { name: string; namespace: string; generation?: number };
  spec: { gatewayClassName: string; listeners?: Listener[] };
}
export interface Listener {
  name: string;
  hostname?: string;
  protocol: string;
  port: number;
  tls?: { mode?: string; certificateRefs?: Array<{ group?: string; kind?: string; name: string; namespace?: string }> };
  allowedRoutes?: { namespaces?: { from?: string; selector?: LabelSelector }; kinds?: Array<{ group?: string; kind: string }> };
}
export type RouteKind = 'HTTPRoute' | 'GRPCRoute';
const ROUTE_KINDS: readonly RouteKind[] = ['HTTPRoute', 'GRPCRoute'];

/**
 * The route kinds a listener takes (`supportedKinds`) and those of its `allowedRoutes.kinds` no Gatehouse route is
 * (ResolvedRefs False InvalidRouteKinds). HTTP and HTTPS listeners take both kinds unless `kinds` narrows them.
 */
export function listenerKinds(listener: Listener): { kinds: RouteKind[]; invalid: string[] } {
  if (listener.protocol !== 'HTTP' && listener.protocol !== 'HTTPS') return { kinds: [], invalid: [] };
  const asked = listener.allowedRoutes?.kinds;
  if (!asked?.length) return { kinds: [...ROUTE_KINDS], invalid: [] };
  const ours = (k: { group?: string; kind: string }) => (k.group ?? GROUP) === GROUP && ROUTE_KINDS.includes(k.kind as RouteKind);
  return {
    kinds: ROUTE_KINDS.filter((kind) => asked.some((k) => ours(k) && k.kind === kind)),
    invalid: asked.filter((k) => !ours(k)).map((k) => `${k.group ?? GROUP}/${k.kind}`),
  };
}

/** A Kubernetes label selector (`matchLabels`, `matchExpressions` In/NotIn/Exists/DoesNotExist). */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: string; values?: string[] }>;
}

/** Whether `labels` satisfy `selector`; an operator outside the four matches nothing. */
export function selects(selector: LabelSelector, labels: Readonly<Record<string, string>>): boolean {
  const has = (key: string) => Object.hasOwn(labels, key);
  if (!Object.entries(selector.matchLabels ?? {}).every(([k, v]) => has(k) && labels[k] === v)) return false;
  return (selector.matchExpressions ?? []).every(({ key, operator, values = [] }) => {
    if (operator === 'In') return has(key) && values.includes(labels[key]!);
    if (operator === 'NotIn') return !has(key) || !values.includes(labels[key]!);
    if (operator === 'Exists') return has(key);
    if (operator === 'DoesNotExist') return !has(key);
    return false;
  });
}

/**
 * Whether a listener of a Gateway in `gatewayNamespace` admits a route of `kind` from `routeNamespace`
 * (`allowedRoutes.namespaces.from`: Same, the default; All; Selector, on the route namespace's labels).
 */
export function allows(
  listener: Listener,
  kind: RouteKind,
  routeNamespace: string,
  gatewayNamespace: string,
  namespaceLabels: (namespace: string) => Readonly<Record<string, string>> | undefined,
): boolean {
  if (!listenerKinds(listener).kinds.includes(kind)) return false;
  const { from = 'Same', selector } = listener.allowedRoutes?.namespaces ?? {};
  if (from === 'All') return true;
  if (from === 'Same') return routeNamespace === gatewayNamespace;
  if (from === 'Selector') {
    const labels = namespaceLabels(routeNamespace);
    return selector !== undefined && labels !== undefined && selects(selector, labels);
  }
  return false;
}

/** A ReferenceGrant (gateway.networking.k8s.io/v1beta1): who, from other namespaces, may refer to what in its own. */
export interface ReferenceGrantObject {
  metadata: { name: string; namespace: string };
  spec: { from?: Array<{ group: string; kind: string; namespace: string }>; to?: Array<{ group: string; kind: string; name?: string }> };
}

/** Whether a `kind` route in `fromNamespace` may refer to Service `name` in `toNamespace`: the same namespace, or a ReferenceGrant there says so. */
export function referenceGranted(grants: readonly ReferenceGrantObject[], kind: RouteKind, fromNamespace: string, toNamespace: string, name: string): boolean {
  return fromNamespace === toNamespace || granted(grants, kind, fromNamespace, toNamespace, 'Service', name);
}

/** Whether a ReferenceGrant in `toNamespace` lets a `fromKind` of `fromNamespace` refer to the core `toKind` `name`. */
function granted(grants: readonly ReferenceGrantObject[], fromKind: string, fromNamespace: string, toNamespace: string, toKind: string, name: string): boolean {
  return grants.some(
    (g) =>
      g.metadata.namespace === toNamespace &&
      (g.spec.from ?? []).some((f) => f.group === GROUP && f.kind === fromKind && f.namespace === fromNamespace) &&
      (g.spec.to ?? []).some((t) => (t.group ?? '') === '' && t.kind === toKind && (t.name === undefined || t.name === '' || t.name === name)),
  );
}

/** A Secret as read for a listener's certificateRefs (`type` and the two keys of kubernetes.io/tls, base64). */
export interface TlsSecret {
  type?: string;
  data?: Record<string, string>;
  /** The Secret's version read: an unchanged Secret is kept as the same object, so its pair is checked once. */
  resourceVersion?: string;
}

/**
 * Why an HTTPS listener's `tls.certificateRefs` do not resolve (a listener ResolvedRefs reason), or null.
 * Each ref must be a core Secret, in the Gateway's namespace or granted by a ReferenceGrant there to Gateways
 * of `gatewayNamespace`, of type kubernetes.io/tls holding a PEM certificate and the private key that matches it.
 */
export function certificateRefsProblem(
  listener: Listener,
  gatewayNamespace: string,
  grants: readonly ReferenceGrantObject[],
  secret: (namespace: string, name: string) => TlsSecret | undefined,
): { reason: 'InvalidCertificateRef' | 'RefNotPermitted'; message: string } | null {
  if (listener.protocol !== 'HTTPS') return null;
  if ((listener.tls?.mode ?? 'Terminate') !== 'Terminate')
    return { reason: 'InvalidCertificateRef', message: `tls.mode ${listener.tls?.mode} is not supported` };
  const refs = listener.tls?.certificateRefs ?? [];
  if (refs.length === 0) return { reason: 'InvalidCertificateRef', message: 'an HTTPS listener needs tls.certificateRefs' };
  for (const ref of refs) {
    const where = `${ref.namespace ?? gatewayNamespace}/${ref.name}`;
    if ((ref.group ?? '') !== '' || (ref.kind ?? 'Secret') !== 'Secret')
      return { reason: 'InvalidCertificateRef', message: `certificateRef ${where}: only core Secrets are supported, not ${ref.group ?? ''}/${ref.kind}` };
    const to = ref.namespace ?? gatewayNamespace;
    if (to !== gatewayNamespace && !granted(grants, 'Gateway', gatewayNamespace, to, 'Secret', ref.name))
      return { reason: 'RefNotPermitted', message: `certificateRef ${where}: no ReferenceGrant in namespace ${to} allows it` };
    const found = secret(to, ref.name);
    if (!found) return { reason: 'InvalidCertificateRef', message: `certificateRef ${where}: Secret not found` };
    const problem = tlsPairProblem(found);
    if (problem) return { reason: 'InvalidCertificateRef', message: `certificateRef ${where}: ${problem}` };
  }
  return null;
}

/**
 * The HTTPS listeners (tls.mode Terminate) of `gateways` whose certificateRefs all resolve, with those Secrets' PEM
 * certificate chain and key: what the data planes serve on GATEWAY_HTTPS_PORT. A listener with a problem
 * (certificateRefsProblem, its status) is left out.
 */
export function gatewayListenersTls(
  gateways: readonly GatewayObject[],
  grants: readonly ReferenceGrantObject[],
  secret: (namespace: string, name: string) => TlsSecret | undefined,
): GatewayListenerTls[] {
  const out: GatewayListenerTls[] = [];
  for (const gw of gateways) {
    const { namespace, name } = gw.metadata;
    for (const l of gw.spec.listeners ?? []) {
      if (l.protocol !== 'HTTPS' || certificateRefsProblem(l, namespace, grants, secret) !== null) continue;
      const certificates = (l.tls?.certificateRefs ?? []).map((ref) => {
        const found = secret(ref.namespace ?? namespace, ref.name)!;
        return { certificate_chain: pemOf(found, 'tls.crt'), private_key: pemOf(found, 'tls.key') };
      });
      out.push({ name: `${namespace}/${name}/${l.name}`, hostname: l.hostname ?? '', port: l.port, certificates });
    }
  }
  return out;
}

const pemOf = (secret: TlsSecret, key: 'tls.crt' | 'tls.key') => Buffer.from(secret.data?.[key] ?? '', 'base64').toString('utf8');

/** Each Secret object's verdict: the status and the snapshot both ask, at every reconcile, and a check builds a TLS context. */
const pairProblems = new WeakMap<TlsSecret, string | null>();

function tlsPairProblem(secret: TlsSecret): string | null {
  let problem = pairProblems.get(secret);
  if (problem === undefined) pairProblems.set(secret, (problem = checkTlsPair(secret)));
  return problem;
}

function checkTlsPair(secret: TlsSecret): string | null {
  if (secret.type !== 'kubernetes.io/tls') return `type ${secret.type ?? 'Opaque'} is not kubernetes.io/tls`;
  try {
    const cert = new X509Certificate(pemOf(secret, 'tls.crt'));
    if (!cert.checkPrivateKey(createPrivateKey(pemOf(secret, 'tls.key')))) return 'tls.key is not the key of tls.crt';
    // What the data planes will build to serve it (a chain that does not parse whole, say).
    tlsContextOf([{ certificate_chain: pemOf(secret, 'tls.crt'), private_key: pemOf(secret, 'tls.key') }]);
  } catch (err) {
    return `tls.crt and tls.key must hold a PEM certificate and its private key (${(err as Error).message})`;
  }
  return null;
}

export interface HTTPRouteObject {
  metadata: { name: string; namespace: string; generation?: number; creationTimestamp?: string | Date };
  spec: {
    parentRefs?: Array<{ group?: string; kind?: string; name: string; namespace?: string; sectionName?: string; port?: number }>;
    hostnames?: string[];
    rules?: HTTPRouteRule[];
  };
}
export interface GRPCRouteObject {
  metadata: HTTPRouteObject['metadata'];
  spec: Omit<HTTPRouteObject['spec'], 'rules'> & { rules?: GRPCRouteRule[] };
}
interface GRPCRouteRule {
  matches?: Array<{ method?: { type?: string; service?: string; method?: string }; headers?: NonNullable<HTTPRouteRule['matches']>[number]['headers'] }>;
  filters?: Filter[];
  backendRefs?: HTTPRouteRule['backendRefs'];
}
interface HTTPRouteRule {
  matches?: Array<{
    path?: { type?: string; value?: string };
    headers?: Array<{ type?: string; name: string; value: string }>;
    queryParams?: unknown[];
    method?: string;
  }>;
  filters?: Filter[];
  backendRefs?: Array<{ group?: string; kind?: string; name: string; namespace?: string; port?: number; weight?: number; filters?: unknown[] }>;
}
interface HeaderModifier {
  set?: Array<{ name: string; value: string }>;
  add?: Array<{ name: string; value: string }>;
  remove?: string[];
}
interface PathModifier {
  type: string;
  replaceFullPath?: string;
  replacePrefixMatch?: string;
}
interface Filter {
  type: string;
  requestHeaderModifier?: HeaderModifier;
  responseHeaderModifier?: HeaderModifier;
  requestRedirect?: { scheme?: string; hostname?: string; path?: PathModifier; port?: number; statusCode?: number };
  urlRewrite?: { hostname?: string; path?: PathModifier };
}

export interface Condition {
  type: 'Accepted' | 'ResolvedRefs' | 'Programmed';
  status: 'True' | 'False';
  reason: string;
  message: string;
}

export interface Translation {
  /** Raw definitions, as the admin API would take them (the caller parses and compiles each). */
  apis: Array<Record<string, unknown>>;
  accepted: Condition;
  resolvedRefs: Condition;
}

const MAX_NAME = 128;

/** Deterministic and within our name rules (1-128 of A-Z a-z 0-9 . _ -): a long one keeps a hash of the whole. */
export function definitionName(namespace: string, name: string, rule: number, match: number, kind: RouteKind = 'HTTPRoute'): string {
  const full = `${kind.toLowerCase()}.${namespace}.${name}.${rule}.${match}`;
  if (full.length <= MAX_NAME) return full;
  const hash = createHash('sha256').update(full).digest('hex').slice(0, 16);
  return `${full.slice(0, MAX_NAME - hash.length - 1)}-${hash}`;
}

class Unsupported extends Error {}
type BackendRef = NonNullable<HTTPRouteRule['backendRefs']>[number];

/** Whether a route may refer to Service `name` in `toNamespace` (its own namespace, or a ReferenceGrant there). */
export type Granted = (toNamespace: string, name: string) => boolean;

/** Why a backendRef does not resolve (a ResolvedRefs reason), or null; throws what is not supported at all. */
function refProblem(
  ref: BackendRef,
  namespace: string,
  serviceExists: (namespace: string, name: string) => boolean,
  granted: Granted,
): { reason: string; message: string } | null {
  if ((ref.group ?? '') !== '' || (ref.kind ?? 'Service') !== 'Service')
    return { reason: 'InvalidKind', message: `backendRef ${ref.name}: only core Services are supported, not ${ref.group ?? ''}/${ref.kind}` };
  const to = ref.namespace ?? namespace;
  if (!granted(to, ref.name)) return { reason: 'RefNotPermitted', message: `backendRef ${to}/${ref.name}: no ReferenceGrant in namespace ${to} allows it` };
  if (ref.port === undefined) throw new Unsupported(`backendRef ${ref.name}: port is required`);
  if (ref.filters?.length) throw new Unsupported(`backendRef ${ref.name}: backendRef filters are not supported`);
  if (!serviceExists(to, ref.name)) return { reason: 'BackendNotFound', message: `Service ${to}/${ref.name} not found` };
  return null;
}

/** A route hostname a listener hostname admits (Gateway API: exact, or under the listener's wildcard, or the route's wildcard covers it). */
function admitted(routeHost: string, listenerHost: string | undefined): string | null {
  if (!listenerHost) return routeHost;
  if (routeHost === listenerHost) return routeHost;
  const under = (host: string, wildcard: string) => wildcard.startsWith('*.') && host.endsWith(wildcard.slice(1)) && host.length > wildcard.length - 1;
  if (under(routeHost, listenerHost)) return routeHost;
  if (under(listenerHost, routeHost)) return listenerHost;
  return null;
}

/** The hosts of a route on `listenerHosts` (undefined: a listener without hostname), or null when no hostname intersects. */
export function hostsOf(routeHosts: readonly string[], listenerHosts: ReadonlyArray<string | undefined>): string[] | null {
  if (listenerHosts.some((h) => h === undefined) && routeHosts.length === 0) return [];
  const out = new Set<string>();
  for (const listener of listenerHosts) {
    if (routeHosts.length === 0) out.add(listener!);
    for (const host of routeHosts) {
      const got = admitted(host, listener);
      if (got) out.add(got);
    }
  }
  return out.size === 0 ? null : [...out].sort();
}

const trimSlash = (path: string) => (path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path);

function transformer(mod: HeaderModifier): Record<string, unknown> {
  const headers = (list: Array<{ name: string; value: string }> = []) => Object.fromEntries(list.map((h) => [h.name, h.value]));
  const config: Record<string, unknown> = {};
  if (mod.remove?.length) config.remove = { headers: mod.remove };
  if (mod.set?.length) {
    config.replace = { headers: headers(mod.set) };
    config.add = { headers: headers(mod.set) };
  }
  if (mod.add?.length) config.append = { headers: headers(mod.add) };
  return config;
}

/**
 * Translates one route for the listener hostnames of the Gateways it attaches to. `serviceExists` says whether
 * a Service is known (a missing one: ResolvedRefs False BackendNotFound, its target kept: the data plane answers 503).
 */
export function translateRoute(
  route: HTTPRouteObject | GRPCRouteObject,
  listenerHosts: ReadonlyArray<string | undefined>,
  serviceExists: (namespace: string, name: string) => boolean,
  kind: RouteKind = 'HTTPRoute',
  granted: Granted = () => false,
): Translation {
  const { namespace, name } = route.metadata;
  const ok = (type: Condition['type']): Condition => ({
    type,
    status: 'True',
    reason: type,
    message: type === 'Accepted' ? 'Route is accepted' : 'All references are resolved',
  });
  let resolvedRefs = ok('ResolvedRefs');
  const hosts = hostsOf(route.spec.hostnames ?? [], listenerHosts);
  if (!hosts) {
    return {
      apis: [],
      accepted: {
        type: 'Accepted',
        status: 'False',
        reason: 'NoMatchingListenerHostname',
        message: 'no hostname of the route matches a listener of the Gateway',
      },
      resolvedRefs,
    };
  }
  const apis: Array<Record<string, unknown>> = [];
  try {
    const grpc = kind === 'GRPCRoute';
    const rules = grpc ? ((route as GRPCRouteObject).spec.rules ?? []).map(asHttpRule) : ((route as HTTPRouteObject).spec.rules ?? []);
    rules.forEach((rule, r) => {
      const targets: Array<{ target: string; weight: number }> = [];
      for (const ref of rule.backendRefs ?? []) {
        const problem = refProblem(ref, namespace, serviceExists, (to, svc) => to === namespace || granted(to, svc));
        if (problem) {
          if (resolvedRefs.status === 'True') resolvedRefs = { type: 'ResolvedRefs', status: 'False', reason: problem.reason, message: problem.message };
          continue; // left out: its share goes to the rule's resolved backends, or the rule answers 500
        }
        if ((ref.weight ?? 1) === 0) continue;
        if ((ref.weight ?? 1) > 1000) throw new Unsupported(`backendRef ${ref.name}: weight above 1000 is not supported`);
        targets.push({ target: `k8s://${ref.name}.${ref.namespace ?? namespace}:${ref.port}`, weight: ref.weight ?? 1 });
      }
      const plugins: Array<Record<string, unknown>> = [];
      let rewrite: PathModifier | undefined;
      for (const filter of rule.filters ?? []) {
        if (filter.type === 'RequestHeaderModifier' && filter.requestHeaderModifier)
          plugins.push({ name: 'request_transformer', config: transformer(filter.requestHeaderModifier) });
        else if (filter.type === 'ResponseHeaderModifier' && filter.responseHeaderModifier)
          plugins.push({ name: 'response_transformer', config: transformer(filter.responseHeaderModifier) });
        else if (filter.type === 'RequestRedirect' && filter.requestRedirect)
          plugins.push({ name: 'redirect', config: redirectConfig(filter.requestRedirect) });
        else if (filter.type === 'URLRewrite' && filter.urlRewrite && !filter.urlRewrite.hostname && filter.urlRewrite.path) rewrite = filter.urlRewrite.path;
        else if (filter.type === 'RequestMirror')
          throw new Unsupported('filter RequestMirror is not supported: request_mirror takes a URL, and Services are resolved for upstream targets only');
        else throw new Unsupported(`filter ${filter.type}${filter.type === 'URLRewrite' ? ' with hostname' : ''} is not supported`);
      }
      // A redirect answers without asking an upstream: its rule needs no backend. Without one, and without a
      // backend to forward to (none given, none resolved, every weight 0), the rule answers 500.
      const redirects = plugins.some((p) => p.name === 'redirect');
      if (targets.length === 0 && !redirects)
        plugins.splice(0, plugins.length, { name: 'request_termination', config: { status_code: 500, ...NO_BACKEND[grpc ? 'grpc' : 'http'] } });
      const matches = rule.matches?.length ? rule.matches : [{ path: { type: 'PathPrefix', value: '/' } }];
      matches.forEach((match, m) => {
        if (match.queryParams?.length) throw new Unsupported('matches[].queryParams is not supported');
        const type = match.path?.type ?? 'PathPrefix';
        const value = match.path?.value ?? '/';
        if (type !== 'PathPrefix' && type !== 'Exact') throw new Unsupported(`path match type ${type} is not supported`);
        const prefix = trimSlash(value);
        const proxy: Record<string, unknown> = {
          listen_path: type === 'Exact' ? value : prefix === '/' ? '/*' : `${prefix}/*`,
          upstreams: { balancing: 'weight', targets: targets.length ? targets : [{ target: 'http://127.0.0.1:9', weight: 1 }] },
          // Gateway API forwards the client's Host (only a URLRewrite hostname changes it).
          preserve_host: true,
        };
        if (match.method) proxy.methods = [match.method];
        if (grpc) {
          proxy.methods = ['POST'];
          (proxy.upstreams as Record<string, unknown>).protocol = 'http2';
        }
        for (const header of match.headers ?? []) {
          if ((header.type ?? 'Exact') !== 'Exact') throw new Unsupported(`header match type ${header.type} is not supported`);
          proxy.match_headers = { ...(proxy.match_headers as object), [header.name]: [header.value] };
        }
        if (rewrite) applyRewrite(proxy, rewrite, type, prefix);
        const matchPlugins = plugins.map((p) =>
          p.name === 'redirect' && (p.config as { strip_path?: boolean }).strip_path && type !== 'PathPrefix' ? unsupportedPrefix() : p,
        );
        apis.push({
          name: definitionName(namespace, name, r, m, kind),
          ...(hosts.length && { hosts }),
          proxy,
          ...(matchPlugins.length && { plugins: matchPlugins }),
        });
      });
    });
  } catch (err) {
    if (!(err instanceof Unsupported)) throw err;
    return { apis: [], accepted: { type: 'Accepted', status: 'False', reason: 'UnsupportedValue', message: err.message }, resolvedRefs };
  }
  return { apis, accepted: ok('Accepted'), resolvedRefs };
}

/** A GRPCRoute rule as the HTTPRoute rule it means (the table above). */
function asHttpRule(rule: GRPCRouteRule): HTTPRouteRule {
  for (const filter of rule.filters ?? [])
    if (filter.type !== 'RequestHeaderModifier' && filter.type !== 'ResponseHeaderModifier') throw new Unsupported(`filter ${filter.type} is not supported`);
  const matches = (rule.matches ?? []).map(({ method, headers }) => {
    if (!method) return { headers };
    if ((method.type ?? 'Exact') !== 'Exact') throw new Unsupported(`method match type ${method.type} is not supported`);
    if (!method.service) throw new Unsupported('a method match without service is not supported (no listen_path matches "any service, this method")');
    return {
      path: method.method ? { type: 'Exact', value: `/${method.service}/${method.method}` } : { type: 'PathPrefix', value: `/${method.service}` },
      headers,
    };
  });
  return { ...rule, matches };
}

/**
 * A rule's 500 when no backend is left: for a GRPCRoute the message (a gRPC client reads it in grpc-message); for
 * an HTTPRoute plain text, the route's own answer rather than a gateway error (JSON string), as Gateway API
 * implementations answer it and as clients that read any application/json body as the backend's expect.
 */
const NO_BACKEND_TEXT = 'no valid backend for this route rule';
const NO_BACKEND = {
  grpc: { message: NO_BACKEND_TEXT },
  http: { body: NO_BACKEND_TEXT, content_type: 'text/plain; charset=utf-8' },
} as const;

const unsupportedPrefix = (): never => {
  throw new Unsupported('ReplacePrefixMatch needs a PathPrefix match');
};

function redirectConfig(spec: NonNullable<Filter['requestRedirect']>): Record<string, unknown> {
  const config: Record<string, unknown> = { status_code: spec.statusCode ?? 302 };
  if (spec.scheme) config.scheme = spec.scheme;
  if (spec.hostname) config.host = spec.hostname;
  if (spec.port) config.port = spec.port;
  if (spec.path?.type === 'ReplaceFullPath') config.path = spec.path.replaceFullPath ?? '/';
  if (spec.path?.type === 'ReplacePrefixMatch') {
    config.path = spec.path.replacePrefixMatch ?? '/';
    config.strip_path = true;
  }
  return config;
}

/** URLRewrite as "Forwarded path" in docs/proxy.md "Proxy behaviour": the target's path, with strip_path for a prefix. */
function applyRewrite(proxy: Record<string, unknown>, path: PathModifier, type: string, prefix: string): void {
  const upstreams = proxy.upstreams as { targets: Array<{ target: string }> };
  let targetPath: string;
  if (path.type === 'ReplaceFullPath') targetPath = path.replaceFullPath ?? '/';
  else if (path.type === 'ReplacePrefixMatch' && type === 'PathPrefix') {
    targetPath = path.replacePrefixMatch ?? '/';
    // strip_path: T joined with R minus L, so `/foo/x` → `/bar/x`; `/foo` → `/bar`.
    proxy.strip_path = true;
    if (prefix === '/' && targetPath === '/') delete proxy.strip_path;
  } else throw new Unsupported(`URLRewrite path ${path.type} on a ${type} match is not supported`);
  if (targetPath === '/' && path.type === 'ReplaceFullPath')
    throw new Unsupported('URLRewrite ReplaceFullPath "/" is not supported (a target path "/" forwards the client\'s path)');
  upstreams.targets = upstreams.targets.map((t) => ({ ...t, target: `${t.target}${targetPath === '/' ? '' : targetPath}` }));
}
