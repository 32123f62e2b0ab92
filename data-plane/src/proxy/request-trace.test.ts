import type { IncomingMessage, ServerResponse } from 'node:http';
import { propagationOnly } from './request-trace.js';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_ID = '00f067aa0ba902b7';
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

describe('propagationOnly (tracing off)', () => {
  const start = (headers: Record<string, string>) => propagationOnly.start({ headers } as unknown as IncomingMessage, {} as ServerResponse, 'rid');

  test('a valid traceparent: same trace and flags, a new parent id (the gateway), tracestate kept', () => {
    const trace = start({ traceparent: `00-${TRACE_ID}-${PARENT_ID}-00` });
    const [, traceId, parentId, flags] = TRACEPARENT.exec(trace.traceparent)!;
    expect([traceId, flags, trace.keepTracestate]).toEqual([TRACE_ID, '00', true]);
    expect(parentId).not.toBe(PARENT_ID);
  });

  test.each([
    ['absent', {}],
    ['invalid', { traceparent: `00-${'0'.repeat(32)}-${PARENT_ID}-01`, tracestate: 'v=1' }],
  ])('traceparent %s: a new sampled trace, tracestate dropped', (_name, headers) => {
    const trace = start(headers);
    const [, traceId, , flags] = TRACEPARENT.exec(trace.traceparent)!;
    expect(traceId).not.toBe('0'.repeat(32));
    expect([flags, trace.keepTracestate]).toEqual(['01', false]);
  });

  test('two requests without traceparent start two traces', () => {
    expect(start({}).traceparent.slice(3, 35)).not.toBe(start({}).traceparent.slice(3, 35));
  });
});
