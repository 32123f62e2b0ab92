/**
 * The Gateway API's verdicts on routes (pure: what the informers hold in, verdicts out): which of our Gateways'
 * listeners each HTTPRoute and GRPCRoute attaches to, with its Accepted and ResolvedRefs conditions per parent, and
 * the definitions the accepted ones translate to (translate.ts), less those the data planes could not compile.
 */
import { compileDefinitions, type CompileCache } from '#proto/compile/index';
import { parseApiDefinition, type ApiDefinition } from '#proto/definition/index';
import type { Definitions } from '#proto/definition/types';
import {
  allows,
  GROUP,
  referenceGranted,
  translateRoute,
  type Condition,
  type GatewayObject,
  type GRPCRouteObject,
  type HTTPRouteObject,
  type ReferenceGrantObject,
  type RouteKind,
} from './translate.js';

export type Verdict = {
  route: HTTPRouteObject | GRPCRouteObject;
  kind: RouteKind;
  parents: Array<{ ref: object; accepted: Condition; resolvedRefs: Condition }>;
};

/** A route's translated definition, served while one of its parents accepts it. */
export interface Candidate {
  api: ApiDefinition;
  verdict: Verdict;
}

export interface RouteVerdicts {
  /** One per route with a parent among our Gateways. */
  verdicts: Verdict[];
  candidates: Candidate[];
  /** Routes accepted per listener, by `namespace/gateway/listener`. */
  attached: Map<string, number>;
  /** The candidates' definitions by their translation's JSON: the next judgement's `parsed`. */
  parsed: ParsedApis;
}

/**
 * Definitions a judgement parsed, by the JSON of the translation they were parsed from: given to the next one, a route
 * whose translation did not change keeps its definition object, which the compile cache and the hash memo key on.
 */
export type ParsedApis = ReadonlyMap<string, ApiDefinition>;

/** What the verdicts look up besides the routes and Gateways: ReferenceGrants, a namespace's labels, whether a Service exists. */
export interface RouteWorld {
  grants: ReferenceGrantObject[];
  labelsOf(namespace: string): Record<string, string> | undefined;
  serviceExists(namespace: string, name: string): boolean;
}

/** HTTPRoutes and GRPCRoutes oldest first: of two routes that want the same match, the older keeps it (Gateway API's tie rule). */
export function oldestFirst(http: HTTPRouteObject[], grpc: GRPCRouteObject[]): Array<{ route: HTTPRouteObject | GRPCRouteObject; kind: RouteKind }> {
  return [...http.map((route) => ({ route, kind: 'HTTPRoute' as const })), ...grpc.map((route) => ({ route, kind: 'GRPCRoute' as const }))].sort(
    ({ route: a }, { route: b }) =>
      String(a.metadata.creationTimestamp ?? '').localeCompare(String(b.metadata.creationTimestamp ?? '')) ||
      `${a.metadata.namespace}/${a.metadata.name}`.localeCompare(`${b.metadata.namespace}/${b.metadata.name}`),
  );
}

/** The verdicts on `sorted` (oldestFirst) attached to `gws`, our Gateways. */
export function judgeRoutes(sorted: ReturnType<typeof oldestFirst>, gws: GatewayObject[], world: RouteWorld, previous: ParsedApis = new Map()): RouteVerdicts {
  const { grants: grantList, labelsOf, serviceExists } = world;
  const verdicts: Verdict[] = [];
  const candidates: Candidate[] = [];
  const attached = new Map<string, number>();
  const parsed = new Map<string, ApiDefinition>();
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
      for (const raw of translated.apis) {
        const key = JSON.stringify(raw);
        const api = previous.get(key) ?? parseApiDefinition(raw);
        parsed.set(key, api);
        candidates.push({ api, verdict });
      }
    } catch (err) {
      refuse(verdict, `translated definition refused: ${(err as Error).message}`);
    }
  }
  return { verdicts, candidates, attached, parsed };
}

/** Accepted False (UnsupportedValue) on every parent that accepted the route. */
export function refuse(verdict: { parents: Array<{ accepted: Condition }> }, message: string): void {
  for (const p of verdict.parents)
    if (p.accepted.status === 'True') p.accepted = { type: 'Accepted', status: 'False', reason: 'UnsupportedValue', message: message.slice(0, 1000) };
}

/**
 * The data planes compile the whole snapshot: a candidate that would not compile with the store's definitions
 * (`storedDefs()`) is refused here, so one route never makes a data plane NACK the whole snapshot.
 */
export function refuseUncompilable(candidates: Candidate[], storedDefs: () => Definitions, cache: CompileCache): void {
  const live = candidates.filter((c) => c.verdict.parents.some((p) => p.accepted.status === 'True'));
  if (live.length === 0) return;
  const stored = storedDefs();
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
