/**
 * Which requests the data plane traces (OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG) and what happens to
 * spans when the collector is slow, against a real OTLP/HTTP receiver: an unsampled request gets no span
 * but its traceparent still goes upstream with the sampled flag 0; parent-based samplers follow the
 * caller's flag; spans the queue has no room for are dropped and counted while the proxy keeps answering;
 * a collector that keeps up gets every span; a bad sampler setting stops the start.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { listen } from '#proto/listen';
import { apiDefinition } from '../helpers/api-definition.js';
import { httpRequest } from '../helpers/http-request.js';
import { expectDataPlaneRefusesToStart, startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.js';
import { startUpstream, type RecordedRequest, type Upstream } from '../helpers/upstream-server.js';

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const FAST_EXPORT = { OTEL_BSP_SCHEDULE_DELAY: '50' };

let receiver: OtlpReceiver;
/** An OTLP endpoint that accepts every export request and never answers it. */
let stalled: Server;
let u: Upstream;
let gw: Gateway;
/** parentbased_traceidratio at 0: only a sampled caller's trace is recorded. */
let ratioZero: DataPlane;
/** traceidratio at 0: nothing recorded, whatever the caller's flag. */
let plainRatioZero: DataPlane;
/** The default sampler, exporting to the receiver. */
let keepsUp: DataPlane;
/** A queue of 10, batches of 5, exporting to the stalled endpoint. */
let behind: DataPlane;

const traceId = () => randomBytes(16).toString('hex');
const spanId = () => randomBytes(8).toString('hex');

function parsed(traceparent: unknown): { traceId: string; parentId: string; flags: string } {
  const m = TRACEPARENT.exec(String(traceparent));
  if (!m) throw new Error(`not a version-00 traceparent: ${String(traceparent)}`);
  return { traceId: m[1]!, parentId: m[2]!, flags: m[3]! };
}

/** One request through `dp`; its request id and what the upstream received. */
async function through(dp: DataPlane, headers: Record<string, string> = {}): Promise<{ requestId: string; upstream: RecordedRequest }> {
  const requestId = randomUUID();
  const res = await dp.request('GET', '/sampled/x', { headers: { 'x-request-id': requestId, ...headers } });
  expect(res.status).toBe(200);
  return { requestId, upstream: u.requests.find((r) => r.headers['x-request-id'] === requestId)! };
}

const spansOf = (requestId: string) => receiver.spans.filter((s) => s.attributes['gatehouse.request_id'] === requestId);

async function dropped(dp: DataPlane, reason: string): Promise<number> {
  const metrics = await httpRequest(`${dp.statusUrl}/metrics`);
  const m = new RegExp(`^gatehouse_trace_spans_dropped_total\\{reason="${reason}"\\} (\\d+)$`, 'm').exec(metrics.text);
  if (!m) throw new Error(`no gatehouse_trace_spans_dropped_total{reason="${reason}"} in /metrics`);
  return Number(m[1]);
}

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  stalled = createServer((req) => req.resume());
  const stalledPort = await listen(stalled, 0, '127.0.0.1');
  u = await startUpstream('sampled', { kind: 'fixed' });
  gw = await startGateway();
  const exporting = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, ...FAST_EXPORT };
  const dp = (env: Record<string, string>) => startDataPlane({ controlPlaneAddr: gw.cp.grpcAddr, env });
  [ratioZero, plainRatioZero, keepsUp, behind] = await Promise.all([
    dp({ ...exporting, OTEL_SERVICE_NAME: 'ratio-zero', OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' }),
    dp({ ...exporting, OTEL_SERVICE_NAME: 'plain-ratio-zero', OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' }),
    dp({ ...exporting, OTEL_SERVICE_NAME: 'keeps-up' }),
    dp({
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${stalledPort}`,
      OTEL_BSP_MAX_QUEUE_SIZE: '10',
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '5',
      // Only full batches go, and the stalled export is not given up during the test.
      OTEL_BSP_SCHEDULE_DELAY: '600000',
      OTEL_EXPORTER_OTLP_TIMEOUT: '600000',
    }),
  ]);
  const created = await gw.admin.createApi(apiDefinition({ name: 'sampled', listenPath: '/sampled/*', targets: [u.url] }));
  expect(created.status).toBe(201);
  await gw.admin.waitForDataPlanes(created, [gw.dp, ratioZero, plainRatioZero, keepsUp, behind]);
}, 60_000);

afterAll(async () => {
  const exits = await Promise.all([ratioZero, plainRatioZero, keepsUp, behind].map((dp) => dp?.stop()));
  await gw?.stop();
  stalled?.closeAllConnections();
  await Promise.all([receiver?.close(), u?.close(), new Promise((resolve) => stalled?.close(resolve))]);
  for (const exit of exits) expect(exit).toEqual({ code: 0, signal: null });
}, 30_000);

describe('sampling', () => {
  test('ratio 0: no span, yet the upstream gets a new trace with the gateway as parent and the sampled flag 0', async () => {
    const roots = [await through(ratioZero), await through(ratioZero)];
    const client = { traceId: traceId(), spanId: spanId() };
    const unsampledCaller = await through(ratioZero, { traceparent: `00-${client.traceId}-${client.spanId}-00`, tracestate: 'vendor=abc' });
    for (const hop of roots) expect(parsed(hop.upstream.headers.traceparent).flags).toBe('00');
    expect(parsed(roots[0]!.upstream.headers.traceparent).traceId).not.toBe(parsed(roots[1]!.upstream.headers.traceparent).traceId);
    const continued = parsed(unsampledCaller.upstream.headers.traceparent);
    expect(continued).toMatchObject({ traceId: client.traceId, flags: '00' });
    expect(continued.parentId).not.toBe(client.spanId);
    expect(unsampledCaller.upstream.headers.tracestate).toBe('vendor=abc');

    // A sampled caller's request after them: once its span has arrived, any span of the earlier ones would have too (one queue, in order).
    const marker = await through(ratioZero, { traceparent: `00-${traceId()}-${spanId()}-01` });
    await receiver.waitForSpan(`for request ${marker.requestId}`, (s) => s.attributes['gatehouse.request_id'] === marker.requestId);
    for (const hop of [...roots, unsampledCaller]) expect(spansOf(hop.requestId)).toEqual([]);
    expect(receiver.spans.filter((s) => s.service === 'ratio-zero' && s.parentSpanId === '')).toEqual([]); // no root, ever
  });

  test("parent-based: a sampled caller's trace is recorded and stays sampled upstream, the span the upstream's parent", async () => {
    const client = { traceId: traceId(), spanId: spanId() };
    const hop = await through(ratioZero, { traceparent: `00-${client.traceId}-${client.spanId}-01` });
    const span = await receiver.waitForSpan(`for request ${hop.requestId}`, (s) => s.attributes['gatehouse.request_id'] === hop.requestId);
    expect(span).toMatchObject({ traceId: client.traceId, parentSpanId: client.spanId, service: 'ratio-zero' });
    expect(parsed(hop.upstream.headers.traceparent)).toEqual({ traceId: client.traceId, parentId: span.spanId, flags: '01' });
  });

  test('traceidratio (not parent-based) at 0 records nothing, even for a sampled caller, and says so upstream', async () => {
    const client = { traceId: traceId(), spanId: spanId() };
    const hop = await through(plainRatioZero, { traceparent: `00-${client.traceId}-${client.spanId}-01` });
    expect(parsed(hop.upstream.headers.traceparent)).toMatchObject({ traceId: client.traceId, flags: '00' });
    // The default sampler's DP, same receiver: once its span is in, an export of plainRatioZero's would have had the time to be.
    const marker = await through(keepsUp);
    await receiver.waitForSpan(`for request ${marker.requestId}`, (s) => s.attributes['gatehouse.request_id'] === marker.requestId);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(receiver.spans.filter((s) => s.service === 'plain-ratio-zero')).toEqual([]);
  });

  test('the default sampler (parentbased_always_on) records a new trace, and follows an unsampled caller', async () => {
    const root = await through(keepsUp);
    const span = await receiver.waitForSpan(`for request ${root.requestId}`, (s) => s.attributes['gatehouse.request_id'] === root.requestId);
    expect(parsed(root.upstream.headers.traceparent)).toEqual({ traceId: span.traceId, parentId: span.spanId, flags: '01' });
    const unsampled = await through(keepsUp, { traceparent: `00-${traceId()}-${spanId()}-00` });
    const marker = await through(keepsUp);
    await receiver.waitForSpan(`for request ${marker.requestId}`, (s) => s.attributes['gatehouse.request_id'] === marker.requestId);
    expect(spansOf(unsampled.requestId)).toEqual([]);
    expect(parsed(unsampled.upstream.headers.traceparent).flags).toBe('00');
  });
});

describe('export', () => {
  test('a collector that keeps up gets every span of 300 requests, 20 at a time; none dropped', async () => {
    const ids: string[] = [];
    for (let round = 0; round < 15; round++) ids.push(...(await Promise.all(Array.from({ length: 20 }, () => through(keepsUp)))).map((hop) => hop.requestId));
    for (const id of ids) await receiver.waitForSpan(`for request ${id}`, (s) => s.attributes['gatehouse.request_id'] === id);
    for (const id of ids) expect(spansOf(id)).toHaveLength(1);
    expect(await dropped(keepsUp, 'queue_full')).toBe(0);
    expect(await dropped(keepsUp, 'export_failed')).toBe(0);
  });

  test('a collector that stalls: the proxy answers every request, and the spans with no room in the queue are dropped and counted', async () => {
    for (let i = 0; i < 40; i++) await through(behind);
    // 5 in the export that never ends, 10 queued behind it, the other 25 dropped.
    expect(await dropped(behind, 'queue_full')).toBe(25);
    expect(await dropped(behind, 'export_failed')).toBe(0);
    expect(behind.process.lines().filter((line) => line.json?.msg !== undefined && String(line.json.msg).startsWith('span queue full'))).toHaveLength(1);
  });
});

describe('bad settings stop the start, naming the variable', () => {
  test.each([
    [
      { OTEL_TRACES_SAMPLER: 'ratio' },
      'OTEL_TRACES_SAMPLER: expected one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio, got',
    ],
    [{ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '10%' }, 'OTEL_TRACES_SAMPLER_ARG: expected a number from 0 to 1'],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '1.5' }, 'OTEL_TRACES_SAMPLER_ARG: expected a number from 0 to 1'],
    [{ OTEL_BSP_MAX_QUEUE_SIZE: '0' }, 'OTEL_BSP_MAX_QUEUE_SIZE: expected a whole number of at least 1'],
  ])('%j', async (env, message) => {
    await expectDataPlaneRefusesToStart(gw.cp.grpcAddr, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, ...env }, message);
  });
});
