/**
 * The proxy listener (docs/proxy.md "Proxy behaviour"). Per request, in fixed stages: snapshot → normalise path → match
 * → authorize → pick target → rewrite → forward (streamed both ways) → respond. Every failure
 * becomes one GatehouseError rendered by one function, with the request id on every response.
 */
import { createServer, STATUS_CODES, type IncomingMessage, type OutgoingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { answerGrpcStatus, GatehouseError, gatewayBody, gatewayBodyOf, gatewayGrpcStatus, isGatehouseError, logLevelOf } from '#proto/errors';
import type { Logger } from '#proto/logger';
import { normalizePath, refusedBeforeRouting, refusedForApi, rewrite } from '../routing/index.js';
import type { RouteUpstream, ServingTable, TableSource } from '../table/index.js';
import { isPromise, PluginExchange, runRequestHooks, type PluginAnswer, type Pipeline } from '../plugins/index.js';
import type { RouteMatch } from '../routing/index.js';
import type { CompiledTarget } from '#proto/compile/index';
import { createMirrorSender } from './mirror.js';
import { forward, ProxyResponse, recordGrpcStatus, type ForwardDeps, type ForwardPlan } from './forward.js';
import { forwardThroughHooks } from './forward-hooks.js';
import { hashKeyOf } from './hash-key.js';
import type { TargetLoad } from '../routing/index.js';
import { clientResponseHeaders, requestIdOf, upstreamRequestHeaders, withoutConnectionNamed } from './headers.js';
import { forwardedForUpstream, NO_TRUSTED_PROXIES, originalHost, originalScheme, type TrustedProxies } from '../plugins/client-ip.js';
import { UNMATCHED_ROUTE, type ProxyMetrics } from './proxy-metrics.js';
import { CLIENT_CLOSED_REQUEST, pathOf, type AccessLog, type AccessRecord } from './access-log.js';
import { propagationOnly, type RequestTrace, type RequestTracer } from './request-trace.js';
import type { UpstreamPool, UpstreamPools } from './upstream-pools.js';
import { listen } from '#proto/listen';
import type { CertificateSet, CertificateWatcher } from '#proto/certificate-files';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { answerOnSocket, handshake, isWebSocketHandshake, join, switchProtocols } from './upgrade.js';
import { acceptH2c, createHttp2Listener, type Http2Connections, type Http2Listener } from './http2.js';
import { forwardedClientCert } from './client-certificate.js';
import { isHttp2 } from '../plugins/request-framing.js';
import { grpcWebMode, isGrpcCall, isGrpcType } from '../plugins/grpc-web.js';
import { parseGrpcTimeout } from './deadline.js';
import { performance } from 'node:perf_hooks';

export interface ProxyServer {
  readonly server: Server<typeof IncomingMessage, typeof ProxyResponse> | HttpsServer<typeof IncomingMessage, typeof ProxyResponse> | Http2Listener['server'];
  /** Resolves with the bound port (useful with port 0). */
  listen(port: number, host?: string): Promise<number>;
  /**
   * Drains: for `delayMs` it still accepts and serves, every answer closing its connection (`Connection: close`,
   * h2 GOAWAY) so keep-alive clients move on between requests rather than have an idle connection cut under a
   * request already sent; then stops accepting, closes idle connections, lets in-flight requests finish for up
   * to `timeoutMs`, and cuts what is left. Resolves true when everything finished in time.
   */
  close(timeoutMs: number, delayMs?: number): Promise<boolean>;
}

interface RequestTarget {
  path: string;
  /** Raw query string without '?', '' when none. */
  query: string;
}

/** Origin-form (`/a?b`) as sent by clients; absolute-form (`http://h/a?b`) as sent to proxies. */
function splitTarget(url: string | undefined): RequestTarget | null {
  if (!url) return null;
  let target = url;
  if (!url.startsWith('/')) {
    if (!/^https?:\/\//i.test(url)) return null;
    try {
      const parsed = new URL(url);
      target = parsed.pathname + parsed.search;
    } catch {
      return null;
    }
  }
  const q = target.indexOf('?');
  return q === -1 ? { path: target, query: '' } : { path: target.slice(0, q), query: target.slice(q + 1) };
}

/**
 * The Content-Type of a gateway error to a gRPC call (`application/grpc`, `application/grpc+proto` and the like,
 * with or without parameters), or to a gRPC-Web one (`application/grpc-web[-text]…`, whose clients read a
 * Trailers-Only status from the headers as well); null for any other request.
 */
function grpcErrorType(req: IncomingMessage): string | null {
  const type = req.headers['content-type'];
  if (type === undefined) return null;
  const web = grpcWebMode(type);
  if (web) return web.text ? 'application/grpc-web-text' : 'application/grpc-web';
  return isGrpcType(type) ? 'application/grpc' : null;
}

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

/**
 * Slow clients must not hold connections open forever (slowloris): headers within 30 s, the whole
 * request (body included, it streams upstream) within 5 minutes; 16 KiB of headers at most.
 */
const CLIENT_LIMITS = { headersTimeout: 30_000, requestTimeout: 300_000, maxHeaderSize: 16 * 1024 };

/**
 * The route for this request. A CORS preflight (OPTIONS with Origin and Access-Control-Request-Method)
 * asks about another method: when no route takes OPTIONS itself, the route the announced method would
 * reach answers it, provided that route has a cors plugin (which then answers the preflight).
 */
function matchRequest(snapshot: ServingTable, req: IncomingMessage, path: string): RouteMatch | null {
  const facts = { method: req.method ?? 'GET', host: req.headers.host, path, headers: req.headers };
  const match = snapshot.routing.match(facts);
  if (match || req.method !== 'OPTIONS') return match;
  const announced = req.headers['access-control-request-method'];
  if (announced === undefined || req.headers.origin === undefined) return null;
  const preflight = snapshot.routing.match({ ...facts, method: announced.toUpperCase() });
  return preflight && preflight.route.plugins.some((p) => p.name === 'cors') ? preflight : null;
}

export function createProxyServer(deps: {
  holder: TableSource;
  pools: UpstreamPools;
  logger: Logger;
  metrics?: ProxyMetrics;
  /** null or absent: no access log (ACCESS_LOG=off). */
  accessLog?: AccessLog | null;
  /** Spans per request when tracing is on; absent: W3C traceparent propagation only. */
  tracer?: RequestTracer;
  /** PROXY_TLS_CERT / PROXY_TLS_KEY: the listener serves HTTPS with the watched files (new ones for new connections). */
  tls?: CertificateWatcher | null;
  /** PROXY_HTTP2: with `tls`, h2 is offered by ALPN beside HTTP/1.1 (http2.ts). */
  http2?: boolean;
  /** PROXY_H2C: without `tls`, a connection that opens with the HTTP/2 preface is served h2 (http2.ts acceptH2c). */
  h2c?: boolean;
  /** PROXY_TLS_MIN_VERSION (default TLSv1.2). */
  tlsMinVersion?: 'TLSv1.2' | 'TLSv1.3';
  /** TRUSTED_PROXIES (plugins/client-ip.ts); none when absent. */
  trustedProxies?: TrustedProxies;
}): ProxyServer {
  const { holder, pools, logger, metrics } = deps;
  const trusted = deps.trustedProxies ?? NO_TRUSTED_PROXIES;
  const accessLog = deps.accessLog ?? null;
  const tracer = deps.tracer ?? propagationOnly;
  let draining = false;
  const forwardDeps: ForwardDeps = { logger, metrics, draining: () => draining };
  const mirrors = createMirrorSender({ pools, logger, metrics });

  /**
   * A failed request as a GatehouseError, counted and logged: a GatehouseError as it is, anything else
   * logged as unexpected and turned into INTERNAL (counted under no route).
   */
  function recordFailure(req: IncomingMessage, requestId: string, err: unknown, routeId: string): GatehouseError {
    if (!isGatehouseError(err)) {
      logger.error({ requestId, method: req.method, path: pathOf(req.url), err }, 'unexpected proxy failure');
      return recordFailure(req, requestId, new GatehouseError('INTERNAL', 'internal error', { cause: err }), '');
    }
    metrics?.request(routeId || UNMATCHED_ROUTE, err.status);
    logger[logLevelOf(err.code)](
      { requestId, method: req.method, path: pathOf(req.url), route: routeId || undefined, code: err.code, err: err.message },
      'gateway error',
    );
    return err;
  }

  /** The head of every answer the gateway makes itself: the plugins' client headers, the request id, a draining close. */
  const gatewayHead = (extra: OutgoingHttpHeaders | null, requestId: string): OutgoingHttpHeaders => ({
    ...extra,
    'x-request-id': requestId,
    ...(draining ? { connection: 'close' } : {}),
  });

  /**
   * Answers a failed request (recordFailure's error): the JSON body of its code, or for a gRPC request gRPC's
   * Trailers-Only answer, or a cut connection once the head is out. `extra`: headers plugins added for the
   * client (CORS, rate-limit, Connection: close), or null.
   */
  function sendError(res: ServerResponse, requestId: string, err: GatehouseError, routeId: string, extra: OutgoingHttpHeaders | null = null): void {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (res.destroyed) return;
    // An h2 response keeps the headers of a writeHead node refused (an upstream's): the error's own replace them.
    if (isHttp2(res.req)) for (const name of res.getHeaderNames()) res.removeHeader(name);
    const head = gatewayHead(extra, requestId);
    const grpcType = grpcErrorType(res.req);
    if (grpcType) {
      sendTrailersOnly(res, gatewayGrpcStatus(err.code), err.status, head, grpcType, routeId);
      return;
    }
    const body = gatewayBodyOf(err);
    res.writeHead(err.status, { ...head, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  }

  /**
   * gRPC's Trailers-Only answer (PROTOCOL-HTTP2.md): 200 and the status in one HEADERS frame that ends the stream
   * (end() without writeHead sends it so; writeHead would send the head alone, and a gRPC client reads a stream
   * that ends without trailers as a broken one). The answer's HTTP status (an error's, a plugin answer's) is then put
   * back on the response for what reads it at 'close' (access log, span), as the metrics count it: the wire's 200
   * says nothing there.
   */
  function sendTrailersOnly(
    res: ServerResponse,
    status: { 'grpc-status': string; 'grpc-message': string },
    httpStatus: number,
    head: OutgoingHttpHeaders,
    type: string,
    routeId: string,
  ): void {
    const headers = { ...head, 'content-type': type, ...status };
    recordGrpcStatus(res, metrics, routeId || UNMATCHED_ROUTE, status['grpc-status']);
    // node's h2 drops a Connection header with a warning: it is HTTP/1.1's alone.
    if (isHttp2(res.req)) delete headers.connection;
    for (const [name, value] of Object.entries(headers)) if (value !== undefined) res.setHeader(name, value);
    res.statusCode = 200;
    res.end();
    res.statusCode = httpStatus;
  }

  /**
   * A response a plugin gave instead of forwarding (a CORS preflight, a proxy_cache hit). To a gRPC request it is a
   * Trailers-Only answer with the client headers alone (an HTTP body or Location means nothing to a gRPC client).
   */
  function sendAnswer(res: ServerResponse, requestId: string, answer: PluginAnswer, ex: PluginExchange, routeId: string): void {
    metrics?.request(routeId, answer.status);
    const access = (res as ProxyResponse).access;
    if (access && ex.consumer !== null) access.consumer = ex.consumer;
    if (res.destroyed) return;
    const grpcType = grpcErrorType(res.req);
    if (grpcType) {
      const status = answerGrpcStatus(answer.status, answer.message ?? STATUS_CODES[answer.status] ?? '');
      sendTrailersOnly(res, status, answer.status, gatewayHead(ex.clientHeaders, requestId), grpcType, routeId);
      return;
    }
    const body = answer.body ?? '';
    // A HEAD (or 304) answer has no body: the length it gives is the one a GET would have (a cached response's).
    // A 204 has none to give (RFC 9110 §8.6: a server must not send Content-Length in it), a 304 only a GET's.
    const givenLength = res.req.method === 'HEAD' || answer.status === 304 ? answer.headers?.['content-length'] : undefined;
    const length = answer.status === 204 ? undefined : (givenLength ?? (answer.status === 304 ? undefined : Buffer.byteLength(body)));
    const headers: OutgoingHttpHeaders = {
      ...ex.clientHeaders,
      ...answer.headers,
      'content-length': length,
      'x-request-id': requestId,
      ...(draining ? { connection: 'close' } : {}),
    };
    if (length === undefined) delete headers['content-length'];
    res.writeHead(answer.status, headers);
    res.end(body);
  }

  /**
   * Pools of the targets whose origin is fixed (no placeholder), by target: a CompiledTarget belongs
   * to one compiled route (one dial timeout and TLS mode) and is replaced when its route changes.
   * A WeakMap lookup costs a fraction of pools.get's key string + lru-cache get. Targets whose host comes from the request keep the
   * bounded LRU; a pool it evicted is closed, so a closed one is looked up again.
   */
  const fixedPools = new WeakMap<CompiledTarget, UpstreamPool>();
  function poolFor(target: CompiledTarget, origin: string, upstream: RouteUpstream): UpstreamPool {
    if (!target.plan.resolved) return pools.get(origin, upstream);
    let pool = fixedPools.get(target);
    if (pool === undefined || pool.closed) {
      pool = pools.get(origin, upstream);
      fixedPools.set(target, pool);
    }
    return pool;
  }

  /** How a request goes to `target`: rewritten path, pool and upstream headers. */
  function planFor(
    req: IncomingMessage,
    requestId: string,
    ex: PluginExchange | null,
    snapshot: ServingTable,
    match: RouteMatch,
    upstream: RouteUpstream,
    target: CompiledTarget,
    path: string,
    query: string,
    access: AccessRecord | null,
    trace: RequestTrace,
  ): ForwardPlan {
    const destination = rewrite(match, target, { path, query, host: req.headers.host });
    if (access) {
      access.upstream = destination.origin;
      if (ex?.consumer != null) access.consumer = ex.consumer;
    }
    trace.upstream(destination.origin);
    const pool = poolFor(target, destination.origin, upstream);
    const headers = upstreamRequestHeaders(ex ? ex.headers : withoutConnectionNamed(req.rawHeaders), {
      host: destination.host,
      forwardedFor: forwardedForUpstream(req),
      forwardedHost: originalHost(req, trusted),
      proto: originalScheme(req, trusted),
      sessionCookies: snapshot.sessionCookies,
      requestId,
      traceparent: trace.traceparent,
      keepTracestate: trace.keepTracestate,
      consumer: ex ? ex.consumer : null,
      consumerGroups: ex ? ex.groupsHeader : null,
      clientCert: clientCertificates ? forwardedClientCert(req) : null,
    });
    return {
      requestId,
      routeId: match.route.id,
      pool,
      path: destination.path,
      headers,
      headersTimeoutMs: upstream.headersTimeoutMs,
      observer: snapshot.authorizer.observe(match.route),
      plugins: ex,
      load: upstream.balancer.loadOf(target),
    };
  }

  /** One request failed: a GatehouseError is answered as such, anything else is logged and answered 500. */
  function failed(res: ServerResponse, requestId: string, err: unknown, routeId: string, extra: OutgoingHttpHeaders | null): void {
    const error = recordFailure(res.req, requestId, err, routeId);
    // The plugins' client headers (CORS, rate limit) belong to the route's own refusals, not to an internal failure.
    sendError(res, requestId, error, error === err ? routeId : '', error === err ? extra : null);
  }

  /**
   * The snapshot, route and normalised path of a request (HTTP/1.1, h2 and WebSocket handshakes alike); throws
   * NO_SNAPSHOT / AMBIGUOUS_PATH / NO_ROUTE. A path an upstream could read otherwise than the router did is refused
   * before matching; encoded slashes after it, unless the matched API allows them (proxy.allow_encoded_slashes).
   */
  function routeOf(req: IncomingMessage): { snapshot: ServingTable; match: RouteMatch; path: string; query: string } {
    // Read the reference once: this request uses this snapshot to the end, whatever is applied meanwhile.
    const snapshot = holder.current();
    if (!snapshot) throw new GatehouseError('NO_SNAPSHOT', 'no snapshot applied yet');
    const target = splitTarget(req.url);
    const path = target ? normalizePath(target.path) : null;
    const early = path && refusedBeforeRouting(path);
    if (early) throw new GatehouseError('AMBIGUOUS_PATH', early);
    const match = path ? matchRequest(snapshot, req, path) : null;
    if (!match || !path) throw new GatehouseError('NO_ROUTE', 'no API found with those values');
    const late = refusedForApi(path, match.route.proxy.allow_encoded_slashes);
    if (late) throw new GatehouseError('AMBIGUOUS_PATH', late);
    return { snapshot, match, path, query: target!.query };
  }

  /**
   * Synchronous up to the upstream dispatch for routes without plugins (forward() reports a failure
   * through its callback); routes with plugins go on in withPlugins. Throws what fails before a route matched.
   */
  function proxy(req: IncomingMessage, res: ProxyResponse, requestId: string, access: AccessRecord | null, trace: RequestTrace): void {
    const { snapshot, match, path, query } = routeOf(req);
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
  /** Joined WebSocket connections: a drain that runs out of time cuts them (the server's close waits for them). */
  const upgraded = new Set<Duplex>();

  /**
   * A request with `Connection: Upgrade`. A WebSocket handshake is matched, authorised (the route's request
   * plugins) and rewritten as any request, then joined to the target (upgrade.ts); retry and cb do not apply
   * (a handshake is not retried) and neither do response plugins. Any other upgrade (h2c) is declined: without
   * a body the request is served as an ordinary one on a connection that then closes.
   */
  async function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy());
    const requestId = requestIdOf(req.headers['x-request-id']);
    if (!isWebSocketHandshake(req)) {
      declineUpgrade(req, socket, requestId);
      return;
    }
    let routeId = '';
    /** The route's plugin exchange: the headers its hooks add for the client go on every answer (WWW-Authenticate, RateLimit-*). */
    let ex: PluginExchange | null = null;
    // One access line and one span per handshake, ended when the connection closes: a WebSocket's cover its whole life.
    const access = accessLog?.start(req, requestId, socket as Socket) ?? null;
    const trace = tracer.handshake(req, requestId);
    let status = CLIENT_CLOSED_REQUEST;
    /** least_conn's count of the target, held from the handshake until the joined connections close (or it failed). */
    let load: TargetLoad | null = null;
    socket.once('close', () => {
      const answered = status !== CLIENT_CLOSED_REQUEST;
      if (access) accessLog!.finish(access, socket as Socket, status, !answered);
      trace.end(answered ? status : null);
    });
    try {
      const { snapshot, match, path, query } = routeOf(req);
      routeId = match.route.id;
      if (access) access.route = routeId;
      trace.route(routeId);
      const upstream = snapshot.upstreams.get(match.route);
      if (!upstream) throw new GatehouseError('INTERNAL', `route ${routeId} has no upstream state`);
      if (upstream.pipeline) {
        ex = new PluginExchange(req, match, requestId, path, query, upstream.pipeline);
        ex.headers = withoutConnectionNamed(req.rawHeaders);
        const walk = runRequestHooks(upstream.pipeline, ex);
        const answer = isPromise<PluginAnswer | null>(walk) ? await walk : walk;
        if (answer) {
          metrics?.request(routeId, (status = answer.status));
          answerOnSocket(socket, answer.status, { ...ex.clientHeaders, ...answer.headers, 'x-request-id': requestId }, answer.body ?? '');
          return;
        }
      }
      const plan = planFor(
        req,
        requestId,
        ex,
        snapshot,
        match,
        upstream,
        upstream.balancer.next(hashKeyOf(req, match.route, trusted)),
        path,
        ex ? ex.query : query,
        access,
        trace,
      );
      if ((load = plan.load)) load.inFlight++;
      const result = await handshake(plan.pool, plan, socket);
      if (result.kind === 'response') {
        metrics?.request(routeId, (status = result.status));
        answerOnSocket(socket, result.status, { ...clientResponseHeaders(result.headers, requestId), ...ex?.clientHeaders }, result.body);
        return;
      }
      if (socket.destroyed) {
        result.socket.destroy();
        return;
      }
      metrics?.request(routeId, (status = 101));
      // The target's 101 head minus hop-by-hop headers, then the two that make it a 101.
      switchProtocols(socket, {
        ...clientResponseHeaders(result.headers, requestId),
        ...ex?.clientHeaders,
        connection: 'Upgrade',
        upgrade: result.headers.upgrade ?? 'websocket',
      });
      upgraded.add(socket);
      await join(socket, result.socket, head);
      upgraded.delete(socket);
    } catch (err) {
      if (socket.destroyed && isGatehouseError(err)) return; // the client left during the handshake: nobody to answer
      const error = recordFailure(req, requestId, err, routeId);
      status = error.status;
      const extra = error === err ? ex?.clientHeaders : null;
      answerOnSocket(socket, error.status, { ...extra, 'content-type': 'application/json', 'x-request-id': requestId }, gatewayBodyOf(error));
    } finally {
      if (load) load.inFlight--;
    }
  }

  /** An upgrade other than WebSocket: served as an ordinary request when it has no body, refused otherwise. */
  function declineUpgrade(req: IncomingMessage, socket: Duplex, requestId: string): void {
    if (req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] ?? '0') !== '0') {
      answerOnSocket(socket, 400, { 'content-type': 'application/json', 'x-request-id': requestId }, gatewayBody('UPGRADE_UNSUPPORTED'));
      return;
    }
    const res = new ProxyResponse(req);
    res.shouldKeepAlive = false;
    res.assignSocket(socket as Socket);
    res.once('finish', () => socket.end());
    req.push(null);
    handle(req, res);
  }

  /** An h2 request whose Host contradicts its `:authority`, or that has neither (http2.ts). */
  const refuseHost = (req: IncomingMessage, res: ServerResponse): void =>
    failed(
      res,
      requestIdOf(req.headers['x-request-id']),
      new GatehouseError('BAD_REQUEST_HOST', 'Host differs from :authority, or neither is given'),
      '',
      null,
    );

  const options = { ...CLIENT_LIMITS, ServerResponse: ProxyResponse };
  const tls = deps.tls;
  /** PROXY_TLS_CLIENT_CA: every client presents a certificate that CA signed, or its handshake fails. */
  const clientCertificates = tls?.current().ca !== undefined;
  let server: ProxyServer['server'];
  /** The listener's connections: HTTP/1.1 ones from node:http, or h2 and HTTP/1.1 from http2.ts. */
  let connections: Http2Connections;
  if (tls) {
    // TLS 1.2 at least (node's default, stated so no environment lowers it) unless PROXY_TLS_MIN_VERSION raises it.
    const minVersion = deps.tlsMinVersion ?? 'TLSv1.2';
    const context = ({ cert, key, ca }: CertificateSet) => ({ cert, key, minVersion, ...(ca && { ca }) });
    const verify = clientCertificates ? { requestCert: true, rejectUnauthorized: true } : {};
    let secure: Http2Listener['server'] | HttpsServer<typeof IncomingMessage, typeof ProxyResponse>;
    if (deps.http2) {
      const http2 = createHttp2Listener({ ...context(tls.current()), ...verify }, options, handle, refuseHost);
      secure = http2.server;
      connections = http2;
    } else {
      const https = createHttpsServer({ ...options, ...context(tls.current()), ...verify, ALPNProtocols: ['http/1.1'] }, handle);
      secure = https;
      connections = { goAway() {}, drain: () => https.closeIdleConnections(), cut: () => https.closeAllConnections() };
    }
    tls.subscribe((set) => secure.setSecureContext(context(set)));
    server = secure;
  } else {
    const http = createServer(options, handle);
    const h2c = deps.h2c ? acceptH2c(http, options, handle, refuseHost) : null;
    connections = {
      goAway() {
        h2c?.goAway();
      },
      drain() {
        h2c?.drain();
        http.closeIdleConnections();
      },
      cut() {
        h2c?.cut();
        http.closeAllConnections();
      },
    };
    server = http;
  }
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => void upgrade(req, socket, head));

  return {
    server,
    listen(port, host) {
      return listen(server, port, host);
    },
    async close(timeoutMs, delayMs = 0) {
      draining = true;
      if (delayMs > 0) {
        connections.goAway();
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
      // server.close() also closes the idle keep-alive connections (node >= 19).
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      connections.drain();
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
      });
      const drained = await Promise.race([closed.then(() => true as const), timedOut]);
      clearTimeout(timer);
      if (!drained) {
        connections.cut();
        for (const socket of upgraded) socket.destroy();
        await closed;
      }
      return drained;
    },
  };
}
