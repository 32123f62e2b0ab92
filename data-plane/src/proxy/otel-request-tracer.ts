/**
 * Tracing on: one OpenTelemetry SERVER span per proxied request, child of the client's valid
 * `traceparent` (else a new trace), started as the request arrives and ended when the response
 * is finished (or cut); a WebSocket handshake's, when its connection closes. Its id is the parent id the
 * upstream receives. Attributes: method, path,
 * request id, route (its id, in the span name too), upstream origin, response status; 5xx and
 * responses cut short are errors. Loaded by main.ts only when tracing is on, so
 * @opentelemetry/api stays unloaded otherwise.
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, type Span, type Tracer } from '@opentelemetry/api';
import type { IncomingMessage } from 'node:http';
import { spanParent, traceparentOf } from '#proto/span-parent';
import type { RequestTrace, RequestTracer } from './request-trace.js';

/** The span's status: the answer's code (an error from 500), or an error when there was none or it was cut. */
function ended(span: Span, status: number | null, complete: boolean): void {
  if (status !== null) {
    span.setAttribute('http.response.status_code', status);
    if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  }
  if (!complete) {
    span.setAttribute('error.type', 'response_incomplete');
    span.setStatus({ code: SpanStatusCode.ERROR, message: 'the response was cut before its end' });
  }
  span.end();
}

export function createOtelRequestTracer(tracer: Tracer): RequestTracer {
  function begin(req: IncomingMessage, requestId: string): { span: Span; trace: RequestTrace } {
    const method = req.method ?? 'GET';
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    const attributes = {
      'http.request.method': method,
      'url.path': query === -1 ? url : url.slice(0, query),
      // OpenTelemetry's spelling: "1.1", "2".
      'network.protocol.version': req.httpVersionMajor === 2 ? '2' : req.httpVersion,
      'gatehouse.request_id': requestId,
    };
    const parent = spanParent(req.headers.traceparent);
    const span = tracer.startSpan(method, { kind: SpanKind.SERVER, attributes }, parent);
    const trace: RequestTrace = {
      traceparent: traceparentOf(span.spanContext()),
      keepTracestate: parent !== ROOT_CONTEXT, // the client's traceparent was valid
      route(routeId) {
        span.updateName(`${method} ${routeId}`);
        span.setAttribute('gatehouse.route', routeId);
      },
      upstream(origin) {
        span.setAttribute('gatehouse.upstream', origin);
      },
    };
    return { span, trace };
  }
  return {
    start(req, res, requestId) {
      const { span, trace } = begin(req, requestId);
      res.once('close', () => ended(span, res.headersSent ? res.statusCode : null, res.writableFinished));
      return trace;
    },
    handshake(req, requestId) {
      const { span, trace } = begin(req, requestId);
      return { ...trace, end: (status) => ended(span, status, status !== null) };
    },
  };
}
