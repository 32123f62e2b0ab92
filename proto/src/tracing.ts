/**
 * OpenTelemetry tracing for both services: on only when an OTLP endpoint is configured
 * (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT`), spans then go in batches
 * over OTLP in the protocol `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL` names:
 * `http/protobuf` (the specification's default), `http/json` or `grpc`. The SDK honours the standard
 * variables itself (`OTEL_TRACES_SAMPLER`/`_ARG`, `OTEL_BSP_*`, `OTEL_EXPORTER_OTLP_HEADERS`/`_TIMEOUT`,
 * `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`). The SDK is imported only when tracing is on:
 * with it off, no @opentelemetry module is loaded at all. No global provider is registered; each
 * service hands its Tracer to what makes spans.
 */
import type { Tracer } from '@opentelemetry/api';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { Logger } from './logger.js';

export interface Tracing {
  readonly tracer: Tracer;
  /** Where spans are exported. */
  readonly endpoint: string;
  /** Exports what is still queued (bounded by `timeoutMs`), then stops. */
  shutdown(timeoutMs: number): Promise<void>;
}

type ExporterClass = new (config: { url: string }) => SpanExporter;

/** The OTLP protocols, each with the exporter package that speaks it (imported only when tracing is on). */
const EXPORTERS = {
  'http/protobuf': async (): Promise<ExporterClass> => (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter,
  'http/json': async (): Promise<ExporterClass> => (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter,
  grpc: async (): Promise<ExporterClass> => (await import('@opentelemetry/exporter-trace-otlp-grpc')).OTLPTraceExporter,
} as const;

export type OtlpProtocol = keyof typeof EXPORTERS;

/** Where and how spans are exported. */
export interface TraceExport {
  endpoint: string;
  protocol: OtlpProtocol;
}

function isTrue(value: string | undefined): boolean {
  return value?.trim().toLowerCase() === 'true';
}

function protocolOf(env: NodeJS.ProcessEnv): OtlpProtocol {
  const variable = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim() ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const value = env[variable]?.trim() || 'http/protobuf';
  if (!Object.hasOwn(EXPORTERS, value)) {
    const names = Object.keys(EXPORTERS).map((p) => `"${p}"`);
    throw new Error(`${variable} must be ${names.slice(0, -1).join(', ')} or ${names.at(-1)}, got "${value}"`);
  }
  return value as OtlpProtocol;
}

/**
 * The trace export the variables configure, or null when tracing is off. Throws, naming the variable,
 * for an unknown protocol (each service's loadConfig calls it, so the start fails as for any bad setting).
 */
export function traceExport(env: NodeJS.ProcessEnv): TraceExport | null {
  const protocol = protocolOf(env);
  if (isTrue(env.OTEL_SDK_DISABLED) || env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() === 'none') return null;
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (traces) return { endpoint: traces, protocol };
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!base) return null;
  // Over HTTP each signal has its path under the base URL; gRPC names the service in the call, not the URL.
  return { endpoint: protocol === 'grpc' ? base : `${base.replace(/\/+$/, '')}/v1/traces`, protocol };
}

export async function startTracing(service: 'control-plane' | 'data-plane', env: NodeJS.ProcessEnv, logger: Logger): Promise<Tracing | null> {
  const settings = traceExport(env);
  if (!settings) return null;
  const { endpoint, protocol } = settings;
  const [api, sdk, Exporter, resources] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-trace-base'),
    EXPORTERS[protocol](),
    import('@opentelemetry/resources'),
  ]);
  // Export failures would otherwise go unseen: the SDK reports them on its diagnostic channel.
  const warn = (message: string) => logger.warn({ component: 'opentelemetry' }, message);
  api.diag.setLogger({ error: warn, warn, info: () => undefined, debug: () => undefined, verbose: () => undefined }, api.DiagLogLevel.WARN);
  const resource = resources
    .defaultResource()
    .merge(resources.resourceFromAttributes({ 'service.name': `gatehouse-${service}` }))
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const provider = new sdk.BasicTracerProvider({
    resource,
    spanProcessors: [new sdk.BatchSpanProcessor(new Exporter({ url: endpoint }))],
  });
  logger.info({ endpoint, protocol, sampler: env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on' }, 'tracing: exporting spans over OTLP');
  return {
    tracer: provider.getTracer('gatehouse'),
    endpoint,
    async shutdown(timeoutMs) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      });
      await Promise.race([provider.shutdown().catch((err: unknown) => warn(`span export at shutdown failed: ${String(err)}`)), late]);
      clearTimeout(timer);
    },
  };
}
