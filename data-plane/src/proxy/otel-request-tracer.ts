/**
 * Tracing on: one OpenTelemetry SERVER span per proxied request, child of the client's valid
 * `traceparent` (else a new trace), started as the request arrives and ended when the response
 * is finished (or cut). Its id is the parent id the upstream receives. Attributes: method, path,
 * request id, route (its id, in the span name too), upstream origin, response status; 5xx and
 * responses cut short are errors. Loaded by main.ts only when tracing is on, so
 * @opentelemetry/api stays unloaded otherwise.
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, type Span, type Tracer } from '@opentelemetry/api';
import type { ServerResponse } from 'node:http';
import { spanParent, traceparentOf } from '#proto/span-parent';
import type { RequestTrace, RequestTracer } from './request-trace.js';

function ended(span: Span, res: ServerResponse): void {
  if (res.headersSent) {
    span.setAttribute('http.response.status_code', res.statusCode);
    if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  }
  if (!res.writableFinished) {
    span.setAttribute('error.type', 'response_incomplete');
    span.setStatus({ code: SpanStatusCode.ERROR, message: 'the response was cut before its end' });
  }
  span.end();
}

export function createOtelRequestTracer(tracer: Tracer): RequestTracer {
  return {
    start(req, res, requestId): RequestTrace {
      const method = req.method ?? 'GET';
      const url = req.url ?? '/';
      const query = url.indexOf('?');
      const attributes = { 'http.request.method': method, 'url.path': query === -1 ? url : url.slice(0, query), 'gatehouse.request_id': requestId };
      const parent = spanParent(req.headers.traceparent);
      const span = tracer.startSpan(method, { kind: SpanKind.SERVER, attributes }, parent);
      res.once('close', () => ended(span, res));
      return {
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
    },
  };
}
