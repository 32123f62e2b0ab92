/**
 * Tracing on: one OpenTelemetry SERVER span per proxied request, child of the client's valid
 * `traceparent` (else a new trace), started as the request arrives and ended when the response
 * is finished (or cut); a WebSocket handshake's, when its connection closes. Its id is the parent id the
 * upstream receives. Attributes: method, path,
 * request id, route (its id, in the span name too), upstream origin, response status; 5xx and
 * responses cut short are errors. Loaded by main.ts only when tracing is on, so
 * @opentelemetry/api stays unloaded otherwise.
 *
 * The sampler decides first, on the trace id and the caller's sampled flag: a request it does not sample
 * gets no span and no attributes, only propagation (the gateway's span id as parent, the sampled flag 0).
 */
import { SpanKind, SpanStatusCode, type Span } from '@opentelemetry/api';
import type { IncomingMessage } from 'node:http';
import { contextOf, traceparentOf } from '#proto/span-parent';
import { formatTraceparent, newSpanId, newTraceId, parseTraceparent } from '#proto/traceparent';
import type { Tracing } from '#proto/tracing';
import { notRecording, type RequestTrace, type RequestTracer } from './request-trace.js';

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

export function createOtelRequestTracer(tracing: Pick<Tracing, 'tracer' | 'sampled' | 'nextRootTraceId'>): RequestTracer {
  const { tracer } = tracing;
  function begin(req: IncomingMessage, requestId: string): { span: Span | null; trace: RequestTrace } {
    const parent = parseTraceparent(req.headers.traceparent);
    const traceId = parent === null ? newTraceId() : parent.traceId;
    if (!tracing.sampled(parent === null ? null : (parseInt(parent.flags, 16) & 1) === 1, traceId)) {
      const trace = {
        traceparent: formatTraceparent(traceId, newSpanId(), '00'),
        keepTracestate: parent !== null,
        route: notRecording,
        upstream: notRecording,
      };
      return { span: null, trace };
    }
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
    // The sampler's decision was taken on this trace id; the tracer takes it again on the same one.
    if (parent === null) tracing.nextRootTraceId(traceId);
    const span = tracer.startSpan(method, { kind: SpanKind.SERVER, attributes }, contextOf(parent));
    const trace: RequestTrace = {
      traceparent: traceparentOf(span.spanContext()),
      keepTracestate: parent !== null, // the client's traceparent was valid
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
      if (span !== null) res.once('close', () => ended(span, res.headersSent ? res.statusCode : null, res.writableFinished));
      return trace;
    },
    handshake(req, requestId) {
      const { span, trace } = begin(req, requestId);
      return { ...trace, end: span === null ? notRecording : (status) => ended(span, status, status !== null) };
    },
  };
}
