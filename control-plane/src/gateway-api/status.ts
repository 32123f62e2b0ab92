/**
 * The status the Gateway API's leader writes (pure: objects and verdicts in, status out): its GatewayClasses',
 * Gateways' with their listeners, and routes' per parent; conditions carry their lastTransitionTime over from the
 * status held while they do not change.
 */
import { GROUP, listenerKinds, type Condition, type GatewayObject, type Listener } from './translate.js';
import type { Verdict } from './verdicts.js';

/**
 * The conformance features (Gateway API's names, sorted as the field asks) a GatewayClass of ours declares in
 * `status.supportedFeatures`: the core ones of what is served, and the extended ones the suite passes (docs/conformance).
 */
const SUPPORTED_FEATURES = ['GRPCRoute', 'Gateway', 'HTTPRoute', 'HTTPRoutePathRewrite', 'HTTPRouteResponseHeaderModification', 'ReferenceGrant'];

const ok = (type: string): Condition => ({ type: type as Condition['type'], status: 'True', reason: type, message: type });
/** A condition as written: its lastTransitionTime ('' here) is restamped's to fill in. */
const cond = (generation: number | undefined, c: Condition) => ({ ...c, observedGeneration: generation ?? 0, lastTransitionTime: '' });

export function gatewayClassStatus(generation: number | undefined, controllerName: string): Record<string, unknown> {
  const conditions = [cond(generation, { type: 'Accepted', status: 'True', reason: 'Accepted', message: `accepted by ${controllerName}` })];
  return { conditions, supportedFeatures: SUPPORTED_FEATURES.map((name) => ({ name })) };
}

/**
 * A Gateway's status: its listeners' (`attached`: routes accepted per `namespace/gateway/listener`; `certificates`: why
 * an HTTPS listener's certificateRefs do not resolve, or null) and `addresses`.
 */
export function gatewayStatus(
  gw: GatewayObject,
  attached: ReadonlyMap<string, number>,
  addresses: Array<{ type: 'IPAddress' | 'Hostname'; value: string }>,
  certificates: (l: Listener) => { reason: 'InvalidCertificateRef' | 'RefNotPermitted'; message: string } | null,
): Record<string, unknown> {
  const listeners = (gw.spec.listeners ?? []).map((l) => {
    const http = l.protocol === 'HTTP' || l.protocol === 'HTTPS';
    const { kinds, invalid } = listenerKinds(l);
    const certificateProblem = certificates(l);
    const resolved: Condition = certificateProblem
      ? { type: 'ResolvedRefs', status: 'False', ...certificateProblem }
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
          http && !certificateProblem
            ? ok('Programmed')
            : {
                type: 'Programmed',
                status: 'False',
                reason: 'Invalid',
                message: certificateProblem ? 'certificateRefs do not resolve' : 'listener not accepted',
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
  return { ...(addresses.length && { addresses }), conditions, listeners };
}

/** A route's status: the parents other controllers wrote, then ours. */
export function routeStatus({ route, parents }: Verdict, controllerName: string): Record<string, unknown> {
  const held = ((route as { status?: { parents?: Array<{ controllerName?: string }> } }).status?.parents ?? []).filter(
    (p) => p.controllerName !== controllerName,
  );
  const mine = parents.map((p) => ({
    parentRef: p.ref,
    controllerName,
    conditions: [cond(route.metadata.generation, p.accepted), cond(route.metadata.generation, p.resolvedRefs)],
  }));
  return { parents: [...held, ...mine] };
}

/**
 * `status` with each condition's lastTransitionTime kept from an identical condition of `current` (the status held),
 * else now; null when that is what `current` already holds.
 */
export function restamped(current: Record<string, unknown> | undefined, status: Record<string, unknown>): Record<string, unknown> | null {
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const before = canonical(current ?? {});
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
  collect(current);
  const stamp = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(stamp);
    if (!value || typeof value !== 'object') return value;
    const c = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, stamp(v)]));
    if (c.lastTransitionTime === '') c.lastTransitionTime = held.get(`${c.type}|${c.status}|${c.reason}|${c.message}|${c.observedGeneration}`) ?? now;
    return c;
  };
  const next = stamp(status) as Record<string, unknown>;
  return canonical(next) === before ? null : next;
}

/** JSON with sorted keys: the apiserver need not keep the order status was written in. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v,
  );
