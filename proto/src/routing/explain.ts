/**
 * A request explained the way a data plane routes it (POST /explain): the table's own `match`
 * elects the route, its `explain` lists the other routes the lookup considered with the conditions
 * they fail, and `rewrite` gives the upstream URL of each target. Pure: no I/O, no plugin runs
 * (the enabled ones are listed in pipeline order), no balancer state is touched.
 */
import { isGatehouseError } from '../errors.js';
import { normalizePath, refusedBeforeRouting, refusedForApi } from '../compile/normalize-path.js';
import type { CompiledRoute } from '../compile/index.js';
import type { PluginName } from '../plugins/index.js';
import { rewrite } from './rewrite.js';
import { outrankedBecause } from './router.js';
import { headerHolds, headerValue } from './header-match.js';
import type { ConsideredRoute, PriorityRule, RequestHeaders, RouteMatch, RoutingTable } from './index.js';

export interface ExplainInput {
  method: string;
  /** The Host header as a client would send it (a port is allowed); undefined = none. */
  host: string | undefined;
  /** Request target in origin form: the path, optionally `?query`. */
  path: string;
  /** As node gives them (lower-case names, a repeated header joined with ", "); read by header conditions only. */
  headers?: RequestHeaders;
}

export const LOSS_REASONS = ['inactive', 'method_mismatch', 'host_mismatch', 'header_mismatch', 'path_mismatch', 'lower_priority'] as const;
export type LossReason = (typeof LOSS_REASONS)[number];

export interface ExplainedRoute {
  kind: CompiledRoute['kind'];
  /** API name, or OAuth server name for an endpoint route. */
  name: string;
  endpoint?: string;
  listen_path: string | null;
  hosts: string[];
  /** `["ALL"]` when any method matches. */
  methods: string[];
  /** proxy.match_headers; absent when the route has none. */
  match_headers?: Record<string, string[]>;
}

export interface ExplainedCandidate extends ExplainedRoute {
  active: boolean;
  reasons: LossReason[];
  /** One sentence per reason, in the same order. */
  details: string[];
  /** lower_priority: the route that won and the first priority rule that put it first. */
  outranked_by?: { kind: CompiledRoute['kind']; name: string; endpoint?: string; rule: PriorityRule };
}

export interface ExplainedUpstream {
  /** The target as defined (placeholders unresolved). */
  target: string;
  weight: number;
  /** Origin + path + query the data plane would send to; null when the target cannot be resolved. */
  url: string | null;
  /** The upstream Host header; null with `url`. */
  host_header: string | null;
  /** Why the target cannot be resolved (the data plane answers 400 then). */
  error?: string;
}

export interface RequestExplanation {
  /** What was matched: the normalised path (also what is forwarded) and the raw query. */
  request: { method: string; host: string | null; path: string; query: string };
  /** The route that serves the request; null = the proxy answers 404 `no API found with those values`. */
  route: (ExplainedRoute & { params: Record<string, string>; matched_path: string }) | null;
  /** Every target, in definition order, rewritten for this request (the balancer picks among them). */
  upstreams: ExplainedUpstream[];
  /** Enabled plugins of the route, in pipeline (execution) order. */
  plugins: PluginName[];
  /** The other routes the lookup considered (active ones in lookup order, then inactive ones), and why each lost. */
  candidates: ExplainedCandidate[];
  /** Set when the proxy refuses this path with a 400 whatever the route (docs/proxy.md "Proxy behaviour", path normalisation). */
  refused?: { code: 'AMBIGUOUS_PATH'; message: string };
}

/** The two tables of one snapshot: the routed one, and one of inactive APIs (never routed; explained only). */
export interface ExplainTables {
  active: RoutingTable;
  inactive: RoutingTable;
}

const RULE_TEXT: Record<PriorityRule, string> = {
  longer_prefix: 'its listen_path has a longer literal prefix',
  more_conditions: 'it has more conditions (hosts, methods, headers)',
  exact_listen_path: 'its listen_path is exact, this one ends in /*',
  name_order: 'equal priority, its name sorts first',
  id_order: 'equal priority, its route id sorts first',
};

function describe(route: CompiledRoute): ExplainedRoute {
  return {
    kind: route.kind,
    name: route.name,
    ...(route.endpoint ? { endpoint: route.endpoint } : {}),
    listen_path: route.listenPath?.source ?? null,
    hosts: [...route.hosts],
    methods: route.methods ? [...route.methods] : ['ALL'],
    ...(route.headers.length > 0 && { match_headers: Object.fromEntries(route.headers.map((h) => [h.name, [...h.values]])) }),
  };
}

const quoted = (values: readonly string[]): string => values.map((v) => JSON.stringify(v)).join(', ');

/** One clause per header condition the request fails: which header, what it carried, what the route accepts. */
function headerMismatches(route: CompiledRoute, headers: RequestHeaders | undefined): string {
  return route.headers
    .filter((condition) => !headerHolds(condition, headers))
    .map(({ name, values }) => {
      const value = headerValue(headers, name);
      const got = value === undefined ? 'is absent' : `is ${quoted(typeof value === 'string' ? [value] : value)}`;
      return `header ${name} ${got}; the route requires ${values.length === 1 ? quoted(values) : `one of ${quoted(values)}`}`;
    })
    .join('; ');
}

function label(route: CompiledRoute): string {
  return route.endpoint ? `oauth server "${route.name}" (${route.endpoint} endpoint)` : `api "${route.name}"`;
}

function loser(
  considered: ConsideredRoute,
  active: boolean,
  winner: RouteMatch | null,
  request: RequestExplanation['request'],
  headers: RequestHeaders | undefined,
): ExplainedCandidate {
  const { route, failed } = considered;
  const reasons: LossReason[] = [];
  const details: string[] = [];
  const lose = (reason: LossReason, detail: string) => {
    reasons.push(reason);
    details.push(detail);
  };
  if (!active) lose('inactive', 'the API is inactive (active: false)');
  if (failed.includes('method')) lose('method_mismatch', `method ${request.method} is not one of ${[...(route.methods ?? [])].join(', ')}`);
  if (failed.includes('host')) {
    const hosts = route.hosts.join(', ');
    lose('host_mismatch', request.host === null ? `no Host given; the route requires one of ${hosts}` : `host ${request.host} matches none of ${hosts}`);
  }
  if (failed.includes('headers')) lose('header_mismatch', headerMismatches(route, headers));
  if (failed.includes('path')) lose('path_mismatch', `path ${request.path} does not match listen_path ${route.listenPath?.source}`);
  let outranked: ExplainedCandidate['outranked_by'];
  if (active && failed.length === 0 && winner) {
    const rule = outrankedBecause(winner.route, route);
    lose('lower_priority', `${label(winner.route)} comes first: ${RULE_TEXT[rule]}`);
    outranked = { kind: winner.route.kind, name: winner.route.name, ...(winner.route.endpoint ? { endpoint: winner.route.endpoint } : {}), rule };
  }
  return { ...describe(route), active, reasons, details, ...(outranked ? { outranked_by: outranked } : {}) };
}

function upstreamOf(
  match: RouteMatch,
  target: CompiledRoute['targets'][number],
  request: { path: string; query: string; host: string | undefined },
): ExplainedUpstream {
  try {
    const to = rewrite(match, target, request);
    return { target: target.template, weight: target.weight, url: to.origin + to.path, host_header: to.host };
  } catch (err) {
    if (!isGatehouseError(err)) throw err;
    return { target: target.template, weight: target.weight, url: null, host_header: null, error: err.message };
  }
}

export function explainRequest(tables: ExplainTables, input: ExplainInput): RequestExplanation {
  const q = input.path.indexOf('?');
  const path = normalizePath(q < 0 ? input.path : input.path.slice(0, q));
  const query = q < 0 ? '' : input.path.slice(q + 1);
  const facts = { method: input.method.toUpperCase(), host: input.host, path, headers: input.headers };
  const request = { method: facts.method, host: input.host ?? null, path, query };

  const winner = tables.active.match(facts);
  const candidates = [
    ...tables.active
      .explain(facts)
      .filter((c) => c.route.id !== winner?.route.id)
      .map((c) => loser(c, true, winner, request, input.headers)),
    ...tables.inactive.explain(facts).map((c) => loser(c, false, winner, request, input.headers)),
  ];
  const message = refusedBeforeRouting(path) ?? (winner && refusedForApi(path, winner.route.proxy.allow_encoded_slashes));
  const refused = message ? { refused: { code: 'AMBIGUOUS_PATH' as const, message } } : null;
  if (!winner) return { request, route: null, upstreams: [], plugins: [], candidates, ...refused };
  return {
    request,
    route: { ...describe(winner.route), params: winner.params, matched_path: winner.matched },
    upstreams: winner.route.targets.map((t) => upstreamOf(winner, t, { path, query, host: input.host })),
    plugins: winner.route.plugins.map((p) => p.name),
    candidates,
    ...refused,
  };
}
