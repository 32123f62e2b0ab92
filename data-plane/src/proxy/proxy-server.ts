/**
 * The proxy listener (SPEC §4). Per request, in fixed stages: snapshot → normalise path → match
 * → authorize → pick target → rewrite → forward (streamed both ways) → respond. Every failure
 * becomes one GatehouseError rendered by one function, with the request id on every response.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { pipeline, Transform, type Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { GatehouseError, gatewayBody, isGatehouseError, logLevelOf } from '#proto/errors';
import type { Logger } from '#proto/logger';
import { observedResponse, type EndpointObserver } from '../auth/index.js';
import { normalizePath, rewrite } from '../routing/index.js';
import type { SnapshotHolder } from '../sync/snapshot-holder.js';
import { clientIpOf, clientResponseHeaders, requestIdOf, upstreamRequestHeaders } from './headers.js';
import type { ProxyMetrics } from './proxy-metrics.js';
import { upstreamError } from './upstream-error.js';
import { BODY_TIMEOUT_MS, type UpstreamPools } from './upstream-pools.js';

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

function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** Passes chunks through unchanged while showing them to `see`; an observer failure never alters the stream. */
function tap(see: (chunk: Buffer) => void): Transform {
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      try {
        see(chunk);
      } catch {
        // The observer keeps a bounded copy for token bookkeeping only; the client's bytes win.
      }
      callback(null, chunk);
    },
  });
}


/**
 * undici runs its headersTimeout on a coarse timer (about 1 s resolution), so a "250ms"
 * response_header_timeout would fire after about a second. Below that resolution a native timer
 * aborts the request instead, armed once the request body has been handed over (at dispatch when
 * there is none), so upload time never counts; connect time of a new connection does.
 */
const UNDICI_TIMER_RESOLUTION_MS = 1_000;

interface HeaderTimer {
  readonly fired: boolean;
  clear(): void;
}

function preciseHeaderTimer(req: IncomingMessage, hasRequestBody: boolean, timeoutMs: number, abort: AbortController): HeaderTimer {
  let fired = false;
  let settled = false;
  let timer: NodeJS.Timeout | undefined;
  if (timeoutMs >= UNDICI_TIMER_RESOLUTION_MS) return { fired: false, clear: () => undefined };
  const arm = (): void => {
    if (settled) return;
    timer = setTimeout(() => {
      fired = true;
      abort.abort();
    }, timeoutMs);
  };
  if (hasRequestBody) req.once('end', arm);
  else arm();
  return {
    get fired() {
      return fired;
    },
    clear() {
      settled = true;
      clearTimeout(timer);
      req.off('end', arm);
    },
  };
}

export function createProxyServer(deps: {
  holder: SnapshotHolder;
  pools: UpstreamPools;
  logger: Logger;
  metrics?: ProxyMetrics;
}): ProxyServer {
  const { holder, pools, logger, metrics } = deps;
  let draining = false;

  function sendError(res: ServerResponse, requestId: string, err: GatehouseError, routeId: string): void {
    metrics?.requests.inc({ route: routeId, status: err.status });
    logger[logLevelOf(err.code)]({ requestId, route: routeId || undefined, code: err.code, err: err.message }, 'gateway error');
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (res.destroyed) return;
    const body = gatewayBody(err.code);
    res.writeHead(err.status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      'x-request-id': requestId,
      ...(draining ? { connection: 'close' } : {}),
    });
    res.end(body);
  }

  async function proxy(req: IncomingMessage, res: ServerResponse, requestId: string): Promise<void> {
    // Read the reference once: this request uses this snapshot to the end, whatever is applied meanwhile.
    const snapshot = holder.current();
    if (!snapshot) throw new GatehouseError('NO_SNAPSHOT', 'no snapshot applied yet');
    const target = splitTarget(req.url);
    const path = target ? normalizePath(target.path) : null;
    const match = path ? snapshot.table.match({ method: req.method ?? 'GET', host: req.headers.host, path }) : null;
    if (!match || !path) throw new GatehouseError('NO_ROUTE', 'no API found with those values');
    const route = match.route;
    try {
      await snapshot.authorizer.check(route, req.headers.authorization);
      const upstream = snapshot.upstreams.get(route.id);
      if (!upstream) throw new GatehouseError('INTERNAL', `route ${route.id} has no upstream state`);
      const destination = rewrite(match, upstream.balancer.next(), { path, query: target!.query, host: req.headers.host });
      const pool = pools.get(destination.origin, upstream);
      const headers = upstreamRequestHeaders(req.rawHeaders, {
        host: destination.host,
        clientIp: clientIpOf(req.socket.remoteAddress),
        clientHost: req.headers.host,
        requestId,
      });
      await forward(req, res, {
        requestId,
        routeId: route.id,
        pool,
        path: destination.path,
        headers,
        headersTimeoutMs: upstream.headersTimeoutMs,
        observer: snapshot.authorizer.observe(route),
      });
    } catch (err) {
      if (isGatehouseError(err)) sendError(res, requestId, err, route.id);
      else throw err;
    }
  }

  async function forward(
    req: IncomingMessage,
    res: ServerResponse,
    plan: {
      requestId: string;
      routeId: string;
      pool: Dispatcher;
      path: string;
      headers: string[];
      headersTimeoutMs: number;
      observer: EndpointObserver | null;
    },
  ): Promise<void> {
    const { observer } = plan;
    if (res.destroyed) return; // the client left while the request was being authorized
    // A client that goes away aborts the upstream request (and its streamed bodies).
    const abort = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    let body: Readable | null = null;
    if (hasBody(req)) {
      body = observer ? pipeline(req, tap((chunk) => observer.requestChunk(chunk)), () => undefined) : req;
    }
    const headerTimer = preciseHeaderTimer(req, body !== null, plan.headersTimeoutMs, abort);
    const started = performance.now();
    let response: Dispatcher.ResponseData;
    try {
      response = await plan.pool.request({
        method: req.method as Dispatcher.HttpMethod,
        path: plan.path,
        headers: plan.headers,
        body,
        signal: abort.signal,
        headersTimeout: plan.headersTimeoutMs,
        bodyTimeout: BODY_TIMEOUT_MS,
      });
    } catch (err) {
      if (headerTimer.fired) throw new GatehouseError('UPSTREAM_TIMEOUT', 'upstream response headers timed out', { cause: err });
      if (abort.signal.aborted || res.destroyed) return; // nobody left to answer
      throw upstreamError(err);
    } finally {
      headerTimer.clear();
    }
    metrics?.upstreamSeconds.observe({ route: plan.routeId }, (performance.now() - started) / 1000);

    const headers = clientResponseHeaders(response.headers, plan.requestId);
    if (draining) headers.connection = 'close';
    try {
      res.writeHead(response.statusCode, headers);
    } catch (err) {
      // Node refuses some header values undici accepts (e.g. invalid characters): the upstream's fault.
      response.body.destroy();
      throw upstreamError(err);
    }
    metrics?.requests.inc({ route: plan.routeId, status: response.statusCode });
    if (observer) {
      try {
        observer.response(response.statusCode, response.headers);
      } catch {
        // bookkeeping only
      }
    }

    const done = (err: NodeJS.ErrnoException | null): void => {
      if (err) {
        // Headers are gone: the only honest signal left is a cut connection.
        if (!abort.signal.aborted) {
          logger.warn({ requestId: plan.requestId, route: plan.routeId, err: err.code ?? err.message }, 'response stream failed');
        }
        res.destroy();
      }
    };
    if (observer) pipeline(response.body, observedResponse(observer), res, done);
    else pipeline(response.body, res, done);
  }

  const server = createServer((req, res) => {
    const requestId = requestIdOf(req.headers['x-request-id']);
    if (draining) res.setHeader('connection', 'close');
    metrics?.inFlight.inc();
    res.once('close', () => metrics?.inFlight.dec());
    proxy(req, res, requestId).catch((err: unknown) => {
      if (isGatehouseError(err)) {
        sendError(res, requestId, err, '');
        return;
      }
      logger.error({ requestId, err }, 'unexpected proxy failure');
      sendError(res, requestId, new GatehouseError('INTERNAL', 'internal error', { cause: err }), '');
    });
  });

  return {
    server,
    listen(port, host) {
      return new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          resolve((server.address() as AddressInfo).port);
        });
      });
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
