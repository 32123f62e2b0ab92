/**
 * W3C Trace Context at the proxy hop. Every forwarded request carries a `traceparent` whose parent
 * id is the gateway's own span: the client's trace is continued when its header is valid, a new
 * one is started when it is absent or malformed (a malformed header is never forwarded, nor the
 * `tracestate` that came with it). This part runs whether or not spans are exported; recording
 * spans is otel-request-tracer.ts, loaded only when tracing is on.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { formatTraceparent, newSpanId, newTraceparent, parseTraceparent } from '#proto/traceparent';

/** The trace context of one proxied request. */
export interface RequestTrace {
  /** What the upstream receives: the client's (or a new) trace id, the gateway's span as parent. */
  readonly traceparent: string;
  /** The client's `tracestate` goes upstream only along with the valid `traceparent` it belongs to. */
  readonly keepTracestate: boolean;
  /** Records the matched route on the gateway's span (nothing when not recording). */
  route(routeId: string): void;
  /** Records the elected upstream origin (the last one when a retry moved on). */
  upstream(origin: string): void;
}

/** A WebSocket handshake's trace: its span lasts until the connection closes, when the caller ends it. */
export interface HandshakeTrace extends RequestTrace {
  /** The status the client got (101 for an upgraded connection), null when it left before any. */
  end(status: number | null): void;
}

export interface RequestTracer {
  /** Called once per request, as it arrives; a recording tracer ends its span when `res` closes. */
  start(req: IncomingMessage, res: ServerResponse, requestId: string): RequestTrace;
  /** Called once per WebSocket handshake, as it arrives. */
  handshake(req: IncomingMessage, requestId: string): HandshakeTrace;
}

export function notRecording(): void {}

/**
 * Tracing off: propagation only. A continued trace keeps the client's flags; a started one is
 * marked sampled (`01`), so an upstream with the default parent-based sampler records as it
 * would had it been the root.
 */
/** W3C propagation alone for one request: the client's trace continued (or a new one), nothing recorded. */
export function propagate(req: IncomingMessage): RequestTrace {
  const parent = parseTraceparent(req.headers.traceparent);
  return {
    traceparent: parent ? formatTraceparent(parent.traceId, newSpanId(), parent.flags) : newTraceparent(),
    keepTracestate: parent !== null,
    route: notRecording,
    upstream: notRecording,
  };
}

export const propagationOnly: RequestTracer = { start: propagate, handshake: (req) => ({ ...propagate(req), end: notRecording }) };
