/**
 * The answers the gateway makes itself: a failed request's error (the JSON body of its code, or gRPC's
 * Trailers-Only answer to a gRPC call) and a plugin's answer instead of the upstream's (a CORS preflight, a
 * proxy_cache hit). Every one carries the request id, and `Connection: close` while the listener drains.
 */
import { STATUS_CODES, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import { answerGrpcStatus, GatehouseError, gatewayBodyOf, gatewayGrpcStatus, isGatehouseError, logLevelOf } from '#proto/errors';
import type { Logger } from '#proto/logger';
import type { PluginAnswer, PluginExchange } from '../plugins/index.js';
import { isHttp2 } from '../plugins/request-framing.js';
import { grpcWebMode, isGrpcType } from '../plugins/grpc-web.js';
import { recordGrpcStatus, type ProxyResponse } from './forward.js';
import { UNMATCHED_ROUTE, type ProxyMetrics } from './proxy-metrics.js';
import { pathOf } from './access-log.js';

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

export interface GatewayAnswers {
  /**
   * A failed request as a GatehouseError, counted and logged: a GatehouseError as it is, anything else
   * logged as unexpected and turned into INTERNAL (counted under no route).
   */
  recordFailure(req: IncomingMessage, requestId: string, err: unknown, routeId: string): GatehouseError;
  /** One request failed: a GatehouseError is answered as such, anything else is logged and answered 500. */
  failed(res: ServerResponse, requestId: string, err: unknown, routeId: string, extra: OutgoingHttpHeaders | null): void;
  /**
   * A response a plugin gave instead of forwarding (a CORS preflight, a proxy_cache hit). To a gRPC request it is a
   * Trailers-Only answer with the client headers alone (an HTTP body or Location means nothing to a gRPC client).
   */
  sendAnswer(res: ServerResponse, requestId: string, answer: PluginAnswer, ex: PluginExchange, routeId: string): void;
}

export function createGatewayAnswers(deps: { logger: Logger; metrics?: ProxyMetrics; draining(): boolean }): GatewayAnswers {
  const { logger, metrics, draining } = deps;

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
    ...(draining() ? { connection: 'close' } : {}),
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
      ...(draining() ? { connection: 'close' } : {}),
    };
    if (length === undefined) delete headers['content-length'];
    res.writeHead(answer.status, headers);
    res.end(body);
  }

  /** One request failed: a GatehouseError is answered as such, anything else is logged and answered 500. */
  function failed(res: ServerResponse, requestId: string, err: unknown, routeId: string, extra: OutgoingHttpHeaders | null): void {
    const error = recordFailure(res.req, requestId, err, routeId);
    // The plugins' client headers (CORS, rate limit) belong to the route's own refusals, not to an internal failure.
    sendError(res, requestId, error, error === err ? routeId : '', error === err ? extra : null);
  }

  return { recordFailure, failed, sendAnswer };
}
