/**
 * A real OTLP trace receiver on loopback, as a collector is: over HTTP it accepts `POST /v1/traces`
 * in either encoding (`application/x-protobuf`, `application/json`) and answers 200 as a collector
 * does; over gRPC (`protocol: 'grpc'`) it serves TraceService/Export. It records every span with its
 * resource's service name and its attributes flattened to plain values. Any other HTTP request is
 * recorded too (`requests`), so a test can assert that nothing was sent at all.
 */
import { createServer, type Server } from 'node:http';
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { listen } from '#proto/listen';
import { pollUntil } from './poll-until.js';

/**
 * The part of opentelemetry/proto/collector/trace/v1 (OTLP 1.x) the tests read, with its field numbers;
 * protobuf skips the fields left out. Enums are read as their numbers.
 */
const OTLP_TRACES = protobuf
  .parse(`
syntax = "proto3";
package otlp;
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }
message Resource { repeated KeyValue attributes = 1; }
message ScopeSpans { repeated Span spans = 2; }
message Span {
  bytes trace_id = 1; bytes span_id = 2; bytes parent_span_id = 4; string name = 5; int32 kind = 6;
  repeated KeyValue attributes = 9; Status status = 15;
}
message Status { int32 code = 3; }
message KeyValue { string key = 1; AnyValue value = 2; }
message AnyValue { oneof value { string string_value = 1; bool bool_value = 2; int64 int_value = 3; double double_value = 4; } }
`)
  .root.lookupType('otlp.ExportTraceServiceRequest');

const EXPORT_METHOD = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';

/** A protobuf-encoded export request in the shape of the JSON encoding (ids as hex). */
function decodeProtobuf(bytes: Uint8Array): OtlpExport {
  return OTLP_TRACES.toObject(OTLP_TRACES.decode(bytes), { longs: String, bytes: String }) as OtlpExport;
}

export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP SpanKind: 2 = SERVER. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  statusCode: number;
}

export interface ReceivedRequest {
  method: string;
  path: string;
  contentType: string | undefined;
}

export interface OtlpReceiver {
  readonly port: number;
  /** The base URL, as OTEL_EXPORTER_OTLP_ENDPOINT. */
  readonly endpoint: string;
  readonly spans: readonly ReceivedSpan[];
  /** Every request received (method and path), whatever it was. */
  readonly requests: readonly ReceivedRequest[];
  /** Waits for the first span `match` accepts. */
  waitForSpan(what: string, match: (span: ReceivedSpan) => boolean, timeoutMs?: number): Promise<ReceivedSpan>;
  close(): Promise<void>;
}

type OtlpValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}
interface OtlpExport {
  resourceSpans?: Array<{
    resource?: { attributes?: OtlpAttribute[] };
    scopeSpans?: Array<{
      /** Ids: hex in the JSON encoding, base64 from decodeProtobuf. */
      spans?: Array<{
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        attributes?: OtlpAttribute[];
        status?: { code?: number };
      }>;
    }>;
  }>;
}

function plain(value: OtlpValue): string | number | boolean {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  return value.boolValue ?? '';
}

function attributesOf(list: OtlpAttribute[] | undefined): Record<string, string | number | boolean> {
  return Object.fromEntries((list ?? []).map((a) => [a.key, plain(a.value)]));
}

export function spansOf(body: OtlpExport, ids: 'hex' | 'base64' = 'hex'): ReceivedSpan[] {
  const hex = (id: string | undefined) => (ids === 'hex' ? (id ?? '') : Buffer.from(id ?? '', 'base64').toString('hex'));
  const out: ReceivedSpan[] = [];
  for (const resourceSpans of body.resourceSpans ?? []) {
    const service = String(attributesOf(resourceSpans.resource?.attributes)['service.name'] ?? '');
    for (const scope of resourceSpans.scopeSpans ?? []) {
      for (const span of scope.spans ?? []) {
        out.push({
          service,
          traceId: hex(span.traceId),
          spanId: hex(span.spanId),
          parentSpanId: hex(span.parentSpanId),
          name: span.name,
          kind: span.kind,
          attributes: attributesOf(span.attributes),
          statusCode: span.status?.code ?? 0,
        });
      }
    }
  }
  return out;
}

export async function startOtlpReceiver(port = 0, protocol: 'http' | 'grpc' = 'http'): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests: ReceivedRequest[] = [];
  const { bound, close } = protocol === 'grpc' ? await serveGrpc(port, spans, requests) : await serveHttp(port, spans, requests);
  return {
    port: bound,
    endpoint: `http://127.0.0.1:${bound}`,
    spans,
    requests,
    waitForSpan(what, match, timeoutMs = 10_000) {
      return pollUntil(async () => spans.find(match), {
        what: `a span ${what}`,
        timeoutMs,
        details: () => `received: ${JSON.stringify(spans, null, 1).slice(0, 4000)}`,
      });
    },
    close,
  };
}

async function serveHttp(port: number, spans: ReceivedSpan[], requests: ReceivedRequest[]): Promise<{ bound: number; close: () => Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const contentType = req.headers['content-type'];
      requests.push({ method: req.method ?? '', path: req.url ?? '', contentType });
      const json = contentType?.startsWith('application/json');
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !(json || contentType?.startsWith('application/x-protobuf'))) {
        res.writeHead(415).end();
        return;
      }
      const body = Buffer.concat(chunks);
      try {
        spans.push(...(json ? spansOf(JSON.parse(body.toString('utf8')) as OtlpExport) : spansOf(decodeProtobuf(body), 'base64')));
      } catch {
        res.writeHead(400).end();
        return;
      }
      // An empty ExportTraceServiceResponse in the request's encoding.
      if (json) res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  const bound = await listen(server, port, '127.0.0.1');
  const close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return { bound, close };
}

async function serveGrpc(port: number, spans: ReceivedSpan[], requests: ReceivedRequest[]): Promise<{ bound: number; close: () => Promise<void> }> {
  const server = new grpc.Server();
  const identity = (bytes: Buffer) => bytes;
  const service: grpc.ServiceDefinition = {
    Export: {
      path: EXPORT_METHOD,
      requestStream: false,
      responseStream: false,
      requestSerialize: identity,
      requestDeserialize: identity,
      // An empty ExportTraceServiceResponse.
      responseSerialize: () => Buffer.alloc(0),
      responseDeserialize: identity,
    },
  };
  server.addService(service, {
    Export(call: grpc.ServerUnaryCall<Buffer, unknown>, callback: grpc.sendUnaryData<unknown>) {
      requests.push({ method: 'POST', path: EXPORT_METHOD, contentType: 'application/grpc' });
      try {
        spans.push(...spansOf(decodeProtobuf(call.request), 'base64'));
      } catch (err) {
        callback({ code: grpc.status.INVALID_ARGUMENT, details: String(err) });
        return;
      }
      callback(null, {});
    },
  });
  const bound = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  return {
    bound,
    close: async () => {
      server.forceShutdown();
    },
  };
}
