/**
 * Requests with `Connection: Upgrade` on the proxy listener. A WebSocket handshake is routed, authorised and
 * rewritten as any request (route-request.ts, the route's request plugins, plan.ts), then joined to its target
 * (upgrade.ts); any other upgrade is declined.
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { GatehouseError, gatewayBody, gatewayBodyOf, isGatehouseError } from '#proto/errors';
import { isPromise, PluginExchange, runRequestHooks, type PluginAnswer } from '../plugins/index.js';
import type { TrustedProxies } from '../plugins/client-ip.js';
import type { TargetLoad } from '../routing/index.js';
import type { TableSource } from '../table/index.js';
import { CLIENT_CLOSED_REQUEST, type AccessLog } from './access-log.js';
import { ProxyResponse } from './forward.js';
import type { GatewayAnswers } from './gateway-answers.js';
import { hashKeyOf } from './hash-key.js';
import { clientResponseHeaders, requestIdOf, withoutConnectionNamed } from './headers.js';
import type { PlanFor } from './plan.js';
import type { ProxyMetrics } from './proxy-metrics.js';
import type { RequestTracer } from './request-trace.js';
import { routeOf } from './route-request.js';
import { answerOnSocket, handshake, isWebSocketHandshake, join, switchProtocols } from './upgrade.js';

export interface UpgradeHandler {
  /** The listener's 'upgrade' listener. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void>;
  /** Joined WebSocket connections: a drain that runs out of time cuts them (the server's close waits for them). */
  readonly upgraded: ReadonlySet<Duplex>;
}

export function createUpgradeHandler(deps: {
  tables: TableSource;
  metrics?: ProxyMetrics;
  accessLog: AccessLog | null;
  tracer: RequestTracer;
  trusted: TrustedProxies;
  answers: GatewayAnswers;
  planFor: PlanFor;
  /** The listener's request handler: an upgrade declined without a body is served as an ordinary request. */
  handle: (req: IncomingMessage, res: ProxyResponse) => void;
}): UpgradeHandler {
  const { tables, metrics, accessLog, tracer, trusted, planFor, handle } = deps;
  const { recordFailure } = deps.answers;
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
      const { snapshot, match, path, query } = routeOf(tables, req);
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

  return { upgrade, upgraded };
}
