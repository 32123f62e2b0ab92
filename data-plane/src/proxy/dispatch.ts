/**
 * Per-request dispatch on the proxy listener, in fixed stages: serving table → normalise path → match → the route's
 * request plugins (authorize, limit…) → pick target → rewrite → forward (streamed both ways, forward.ts) → respond.
 * Every failure becomes one GatehouseError answered by gateway-answers.ts, with the request id on every response.
 */
import { performance } from 'node:perf_hooks';
import type { IncomingMessage } from 'node:http';
import { GatehouseError } from '#proto/errors';
import type { CompiledTarget } from '#proto/compile/index';
import { isPromise, PluginExchange, runRequestHooks, type PluginAnswer, type Pipeline } from '../plugins/index.js';
import type { TrustedProxies } from '../plugins/client-ip.js';
import { isGrpcCall } from '../plugins/grpc-web.js';
import type { RouteMatch } from '../routing/index.js';
import type { RouteUpstream, ServingTable, TableSource } from '../table/index.js';
import { CLIENT_CLOSED_REQUEST, type AccessLog, type AccessRecord } from './access-log.js';
import { parseGrpcTimeout } from './deadline.js';
import { forward, type ForwardDeps, type ForwardPlan, type ProxyResponse } from './forward.js';
import { forwardThroughHooks } from './forward-hooks.js';
import type { GatewayAnswers } from './gateway-answers.js';
import { hashKeyOf } from './hash-key.js';
import { requestIdOf, withoutConnectionNamed } from './headers.js';
import type { MirrorSender } from './mirror.js';
import type { PlanFor } from './plan.js';
import type { ProxyMetrics } from './proxy-metrics.js';
import type { RequestTrace, RequestTracer } from './request-trace.js';
import { routeOf } from './route-request.js';

/**
 * A gRPC call's deadline (performance.now() ms), counted from its arrival: its grpc-timeout, which then bounds the
 * exchange (forward.ts HeaderWait) and goes upstream as the time left. null for a request that is no gRPC call or
 * whose grpc-timeout is malformed: that one is forwarded as sent, for the server to judge (grpc-js answers
 * INTERNAL "Invalid grpc-timeout value"), rather than dropped, which would hide the client's mistake.
 */
function callDeadline(req: IncomingMessage, grpcTimeout: string | string[]): number | null {
  const ms = isGrpcCall(req) ? parseGrpcTimeout(grpcTimeout) : null;
  return ms === null ? null : performance.now() + ms;
}

export interface DispatchDeps {
  tables: TableSource;
  metrics?: ProxyMetrics;
  accessLog: AccessLog | null;
  tracer: RequestTracer;
  trusted: TrustedProxies;
  forwardDeps: ForwardDeps;
  mirrors: MirrorSender;
  answers: GatewayAnswers;
  planFor: PlanFor;
}

/** The listener's request handler (node:http's, and http2.ts's through node's compatibility API). */
export function createDispatch(deps: DispatchDeps): (req: IncomingMessage, res: ProxyResponse) => void {
  const { tables, metrics, accessLog, tracer, trusted, forwardDeps, mirrors, planFor } = deps;
  const { failed, sendAnswer } = deps.answers;

  /**
   * Synchronous up to the upstream dispatch for routes without plugins (forward() reports a failure
   * through its callback); routes with plugins go on in withPlugins. Throws what fails before a route matched.
   */
  function proxy(req: IncomingMessage, res: ProxyResponse, requestId: string, access: AccessRecord | null, trace: RequestTrace): void {
    const { snapshot, match, path, query } = routeOf(tables, req);
    const route = match.route;
    if (access) access.route = route.id;
    trace.route(route.id);
    try {
      const upstream = snapshot.upstreams.get(route);
      if (!upstream) throw new GatehouseError('INTERNAL', `route ${route.id} has no upstream state`);
      if (upstream.pipeline) {
        withPlugins(req, res, requestId, snapshot, match, upstream, upstream.pipeline, path, query, access, trace);
        return;
      }
      const plan = planFor(
        req,
        requestId,
        null,
        snapshot,
        match,
        upstream,
        upstream.balancer.next(hashKeyOf(req, match.route, trusted)),
        path,
        query,
        access,
        trace,
      );
      forward(req, res, plan, forwardDeps, (err) => failed(res, requestId, err, route.id, null));
    } catch (err) {
      failed(res, requestId, err, route.id, null);
    }
  }

  /**
   * The rest of proxy() for a route with plugins (only those get an exchange); failures are answered, never thrown.
   * Waits for the request hooks only when they returned a promise, so a route whose hooks all answered at once (a
   * cached jwt) dispatches in the same tick. Not an async function: one makes and settles its promise even when it
   * never awaits, a large share of what a cached-jwt request allocates more than a plain one (alloc-per-request.sh
   * with JWT=1).
   */
  function withPlugins(
    req: IncomingMessage,
    res: ProxyResponse,
    requestId: string,
    snapshot: ServingTable,
    match: RouteMatch,
    upstream: RouteUpstream,
    pipeline: Pipeline,
    path: string,
    clientQuery: string,
    access: AccessRecord | null,
    trace: RequestTrace,
  ): void {
    const routeId = match.route.id;
    let ex: PluginExchange | null = null;
    try {
      ex = new PluginExchange(req, match, requestId, path, clientQuery, pipeline);
      ex.headers = withoutConnectionNamed(req.rawHeaders);
      const walk = runRequestHooks(pipeline, ex);
      if (!isPromise<PluginAnswer | null>(walk)) {
        afterRequestHooks(walk, req, res, ex, snapshot, match, upstream, pipeline, path, access, trace);
        return;
      }
      const exchange = ex;
      walk
        .then((answer) => afterRequestHooks(answer, req, res, exchange, snapshot, match, upstream, pipeline, path, access, trace))
        .then(undefined, (err: unknown) => failed(res, requestId, err, routeId, exchange.clientHeaders));
    } catch (err) {
      failed(res, requestId, err, routeId, ex?.clientHeaders ?? null);
    }
  }

  /** The request hooks' answer, or the upstream (through the forward hooks when the route has some); throws what fails at once. */
  function afterRequestHooks(
    answer: PluginAnswer | null,
    req: IncomingMessage,
    res: ProxyResponse,
    ex: PluginExchange,
    snapshot: ServingTable,
    match: RouteMatch,
    upstream: RouteUpstream,
    pipeline: Pipeline,
    path: string,
    access: AccessRecord | null,
    trace: RequestTrace,
  ): void {
    const { requestId, query } = ex;
    const routeId = match.route.id;
    if (answer) {
      sendAnswer(res, requestId, answer, ex, routeId);
      return;
    }
    const planOf = (t: CompiledTarget): ForwardPlan => {
      const plan = planFor(req, requestId, ex, snapshot, match, upstream, t, path, query, access, trace);
      // The first plan only: a retry's further tries are not copied again.
      if (ex.mirror) mirrors.start(ex.mirror, req.method ?? 'GET', plan, upstream, res);
      ex.mirror = null;
      return plan;
    };
    if (pipeline.forward.length > 0) {
      forwardThroughHooks(req, res, ex, pipeline.forward, upstream.balancer, hashKeyOf(req, match.route, trusted), planOf, forwardDeps).then(
        undefined,
        (err: unknown) => failed(res, requestId, err, routeId, ex.clientHeaders),
      );
      return;
    }
    forward(req, res, planOf(upstream.balancer.next(hashKeyOf(req, match.route, trusted))), forwardDeps, (err) =>
      failed(res, requestId, err, routeId, ex.clientHeaders),
    );
  }

  /**
   * The one 'close' listener of every response, shared (`this` is the response): the request's
   * state it needs is on the ProxyResponse, so no closure, context and once() wrapper are made per request.
   */
  function onResponseClose(this: ProxyResponse): void {
    metrics?.ended();
    if (this.access) {
      const complete = this.writableFinished;
      accessLog!.finish(this.access, this.sent!, complete || this.headersSent ? this.statusCode : CLIENT_CLOSED_REQUEST, !complete);
    }
    this.onClientClose?.();
  }

  const handle = (req: IncomingMessage, res: ProxyResponse): void => {
    const requestId = requestIdOf(req.headers['x-request-id']);
    // res.socket is gone by 'close': the access log keeps the connection (an h2 response counts its own bytes).
    const access = accessLog?.start(req, requestId, (res.sent ??= req.socket)) ?? null;
    const trace = tracer.start(req, res, requestId);
    metrics?.started();
    if (access) res.access = access;
    const grpcTimeout = req.headers['grpc-timeout'];
    if (grpcTimeout !== undefined) res.deadline = callDeadline(req, grpcTimeout);
    // The exchange's client-gone abort runs from here too (forward.ts ProxyResponse).
    res.on('close', onResponseClose);
    try {
      proxy(req, res, requestId, access, trace);
    } catch (err) {
      failed(res, requestId, err, '', null);
    }
  };
  return handle;
}
