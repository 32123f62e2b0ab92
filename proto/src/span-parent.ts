/**
 * The parent of a span from an incoming `traceparent`: the caller's remote span when the header
 * is valid, else the root (a new trace). Imports @opentelemetry/api, so only code that runs with
 * tracing on imports it (see tracing.ts).
 */
import { ROOT_CONTEXT, trace, TraceFlags, type Context, type SpanContext } from '@opentelemetry/api';
import { formatTraceparent, parseTraceparent, type TraceParent } from './traceparent.js';

export function spanParent(header: string | string[] | undefined): Context {
  return contextOf(parseTraceparent(header));
}

/** The context of a parsed caller's span (null: the root). */
export function contextOf(parent: TraceParent | null): Context {
  if (!parent) return ROOT_CONTEXT;
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: parent.traceId,
    spanId: parent.parentId,
    traceFlags: parseInt(parent.flags, 16) & TraceFlags.SAMPLED,
    isRemote: true,
  });
}

/** The `traceparent` that makes `span` the parent of the next hop. */
export function traceparentOf(span: SpanContext): string {
  return formatTraceparent(span.traceId, span.spanId, (span.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED ? '01' : '00');
}
