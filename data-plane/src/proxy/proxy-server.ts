/**
 * The proxy listener (README "Proxy behaviour"). Per request, in fixed stages: snapshot → normalise path → match
 * → authorize → pick target → rewrite → forward (streamed both ways) → respond. Every failure
 * becomes one GatehouseError rendered by one function, with the request id on every response.
 */
import { createServer, type IncomingMessage, type OutgoingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import { GatehouseError, gatewayBody, isGatehouseError, logLevelOf } from '#proto/errors';
import type { Logger } from '#proto/logger';
import { normalizePath, rewrite } from '../routing/index.js';
import type { AppliedSnapshot, RouteUpstream, SnapshotHolder } from '../sync/snapshot-holder.js';
import { PluginExchange, runRequestHooks, type PluginAnswer } from '../plugins/index.js';
import type { RouteMatch } from '../routing/index.js';
import type { CompiledTarget } from '#proto/compile/index';
import { forward, type ForwardDeps, type ForwardPlan } from './forward.js';
import { forwardThroughHooks } from './forward-hooks.js';
import { clientIpOf, requestIdOf, upstreamRequestHeaders } from './headers.js';
import { UNMATCHED_ROUTE, type ProxyMetrics } from './proxy-metrics.js';
import { pathOf, type AccessLog, type AccessRecord } from './access-log.js';
import { propagationOnly, type RequestTrace, type RequestTracer } from './request-trace.js';
import type { UpstreamPools } from './upstream-pools.js';
import { listen } from '#proto/listen';

export interface ProxyServer {
  readonly server: Server;
  /** Resolves with the bound port (useful with port 0). */
  listen(port: number, host?: string): Promise<number>;
  /**
   * Stops accepting, lets in-flight requests finish for up to `timeoutMs`, then cuts what is
   * left. Resolves true when everything finished in time.
   */
  close(timeoutMs: number): Promise<boolean>;
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
 * Slow clients must not hold connections open forever (slowloris): headers within 30 s, the whole
 * request (body included, it streams upstream) within 5 minutes; 16 KiB of headers at most.
 */
const CLIENT_LIMITS = { headersTimeout: 30_000, requestTimeout: 300_000, maxHeaderSize: 16 * 1024 };

/**
 * The route for this request. A CORS preflight (OPTIONS with Origin and Access-Control-Request-Method)
 * asks about another method: when no route takes OPTIONS itself, the route the announced method would
 * reach answers it, provided that route has a cors plugin (which then answers the preflight).
 */
function matchRequest(snapshot: AppliedSnapshot, req: IncomingMessage, path: string): RouteMatch | null {
  const facts = { method: req.method ?? 'GET', host: req.headers.host, path };
  const match = snapshot.table.match(facts);
  if (match || req.method !== 'OPTIONS') return match;
  const announced = req.headers['access-control-request-method'];
  if (announced === undefined || req.headers.origin === undefined) return null;
  const preflight = snapshot.table.match({ ...facts, method: announced.toUpperCase() });
  return preflight && preflight.route.plugins.some((p) => p.name === 'cors') ? preflight : null;
}

export function createProxyServer(deps: {
  holder: SnapshotHolder;
  pools: UpstreamPools;
  logger: Logger;
  metrics?: ProxyMetrics;
  /** null or absent: no access log (ACCESS_LOG=off). */
  accessLog?: AccessLog | null;
  /** Spans per request when tracing is on; absent: W3C traceparent propagation only. */
  tracer?: RequestTracer;
}): ProxyServer {
  const { holder, pools, logger, metrics } = deps;
  const accessLog = deps.accessLog ?? null;
  const tracer = deps.tracer ?? propagationOnly;
  let draining = false;
  const forwardDeps: ForwardDeps = { logger, metrics, draining: () => draining };

  /** `extra`: headers plugins added for the client (CORS, rate-limit, Connection: close), or null. */
  function sendError(res: ServerResponse, requestId: string, err: GatehouseError, routeId: string, extra: OutgoingHttpHeaders | null = null): void {
    metrics?.requests.inc({ route: routeId || UNMATCHED_ROUTE, status: err.status });
    const { method, url } = res.req;
    logger[logLevelOf(err.code)]({ requestId, method, path: pathOf(url), route: routeId || undefined, code: err.code, err: err.message }, 'gateway error');
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (res.destroyed) return;
    const body = gatewayBody(err.code);
    res.writeHead(err.status, {
      ...extra,
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      'x-request-id': requestId,
      ...(draining ? { connection: 'close' } : {}),
    });
    res.end(body);
  }

  /** A response a plugin gave instead of forwarding (a CORS preflight). */
  function sendAnswer(res: ServerResponse, requestId: string, answer: PluginAnswer, ex: PluginExchange, routeId: string): void {
    metrics?.requests.inc({ route: routeId, status: answer.status });
    if (res.destroyed) return;
    const body = answer.body ?? '';
    res.writeHead(answer.status, {
      ...ex.clientHeaders,
      ...answer.headers,
      'content-length': Buffer.byteLength(body),
      'x-request-id': requestId,
      ...(draining ? { connection: 'close' } : {}),
    });
    res.end(body);
  }

  /** How a request goes to `target`: rewritten path, pool and upstream headers. */
  function planFor(
    req: IncomingMessage,
    requestId: string,
    ex: PluginExchange | null,
    snapshot: AppliedSnapshot,
    match: RouteMatch,
    upstream: RouteUpstream,
    target: CompiledTarget,
    path: string,
    query: string,
    access: AccessRecord | null,
    trace: RequestTrace,
  ): ForwardPlan {
    const destination = rewrite(match, target, { path, query, host: req.headers.host });
    if (access) access.upstream = destination.origin;
    trace.upstream(destination.origin);
    const pool = pools.get(destination.origin, upstream);
    const headers = upstreamRequestHeaders(ex ? ex.headers : req.rawHeaders, {
      host: destination.host,
      clientIp: clientIpOf(req.socket.remoteAddress),
      clientHost: req.headers.host,
      requestId,
      traceparent: trace.traceparent,
      keepTracestate: trace.keepTracestate,
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
    };
  }

  async function proxy(req: IncomingMessage, res: ServerResponse, requestId: string, access: AccessRecord | null, trace: RequestTrace): Promise<void> {
    // Read the reference once: this request uses this snapshot to the end, whatever is applied meanwhile.
    const snapshot = holder.current();
    if (!snapshot) throw new GatehouseError('NO_SNAPSHOT', 'no snapshot applied yet');
    const target = splitTarget(req.url);
    const path = target ? normalizePath(target.path) : null;
    const match = path ? matchRequest(snapshot, req, path) : null;
    if (!match || !path) throw new GatehouseError('NO_ROUTE', 'no API found with those values');
    const route = match.route;
    if (access) access.route = route.id;
    trace.route(route.id);
    // Only routes with enabled plugins get an exchange; the others allocate nothing for plugins.
    let ex: PluginExchange | null = null;
    try {
      const upstream = snapshot.upstreams.get(route.id);
      if (!upstream) throw new GatehouseError('INTERNAL', `route ${route.id} has no upstream state`);
      if (upstream.pipeline) {
        ex = new PluginExchange(req, route, requestId, target!.query, upstream.pipeline);
        const answer = await runRequestHooks(upstream.pipeline, ex);
        if (answer) {
          sendAnswer(res, requestId, answer, ex, route.id);
          return;
        }
      }
      const query = ex ? ex.query : target!.query;
      if (ex && upstream.pipeline!.forward.length > 0) {
        const planOf = (t: CompiledTarget) => planFor(req, requestId, ex, snapshot, match, upstream, t, path, query, access, trace);
        await forwardThroughHooks(req, res, ex, upstream.pipeline!.forward, upstream.balancer, planOf, forwardDeps);
        return;
      }
      await forward(req, res, planFor(req, requestId, ex, snapshot, match, upstream, upstream.balancer.next(), path, query, access, trace), forwardDeps);
    } catch (err) {
      if (isGatehouseError(err)) sendError(res, requestId, err, route.id, ex?.clientHeaders ?? null);
      else throw err;
    }
  }

  const server = createServer(CLIENT_LIMITS, (req, res) => {
    const requestId = requestIdOf(req.headers['x-request-id']);
    const access = accessLog?.start(req, requestId) ?? null;
    const socket = req.socket;
    const trace = tracer.start(req, res, requestId);
    metrics?.inFlight.inc();
    res.once('close', () => {
      metrics?.inFlight.dec();
      if (access) accessLog!.finish(access, socket, res);
    });
    proxy(req, res, requestId, access, trace).catch((err: unknown) => {
      if (isGatehouseError(err)) {
        sendError(res, requestId, err, '');
        return;
      }
      logger.error({ requestId, method: req.method, path: pathOf(req.url), err }, 'unexpected proxy failure');
      sendError(res, requestId, new GatehouseError('INTERNAL', 'internal error', { cause: err }), '');
    });
  });

  return {
    server,
    listen(port, host) {
      return listen(server, port, host);
    },
    async close(timeoutMs) {
      draining = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
      });
      const drained = await Promise.race([closed.then(() => true as const), timedOut]);
      clearTimeout(timer);
      if (!drained) {
        server.closeAllConnections();
        await closed;
      }
      return drained;
    },
  };
}
