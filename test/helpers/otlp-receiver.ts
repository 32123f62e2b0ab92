/**
 * A real OTLP/HTTP trace receiver on loopback: accepts `POST /v1/traces` with the JSON encoding
 * (what the services' exporter sends), answers 200 `{}` as a collector does, and records every
 * span with its resource's service name and its attributes flattened to plain values. Any other
 * request is recorded too (`requests`), so a test can assert that nothing was sent at all.
 */
import { createServer, type Server } from 'node:http';
import { listen } from '#proto/listen';
import { pollUntil } from './poll-until.js';

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

export interface OtlpReceiver {
  readonly port: number;
  /** The base URL, as OTEL_EXPORTER_OTLP_ENDPOINT. */
  readonly endpoint: string;
  readonly spans: readonly ReceivedSpan[];
  /** Every request received (method and path), whatever it was. */
  readonly requests: ReadonlyArray<{ method: string; path: string; contentType: string | undefined }>;
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
      spans?: Array<{ traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; attributes?: OtlpAttribute[]; status?: { code?: number } }>;
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

export function spansOf(body: OtlpExport): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const resourceSpans of body.resourceSpans ?? []) {
    const service = String(attributesOf(resourceSpans.resource?.attributes)['service.name'] ?? '');
    for (const scope of resourceSpans.scopeSpans ?? []) {
      for (const span of scope.spans ?? []) {
        out.push({
          service,
          traceId: span.traceId,
          spanId: span.spanId,
          parentSpanId: span.parentSpanId ?? '',
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

export async function startOtlpReceiver(port = 0): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests: Array<{ method: string; path: string; contentType: string | undefined }> = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      requests.push({ method: req.method ?? '', path: req.url ?? '', contentType: req.headers['content-type'] });
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !req.headers['content-type']?.startsWith('application/json')) {
        res.writeHead(415).end();
        return;
      }
      try {
        spans.push(...spansOf(JSON.parse(Buffer.concat(chunks).toString('utf8')) as OtlpExport));
      } catch {
        res.writeHead(400).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  const bound = await listen(server, port, '127.0.0.1');
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
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
