/**
 * OpenTelemetry tracing for both services: on only when an OTLP endpoint is configured
 * (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`), spans
 * then go in batches over OTLP/HTTP (JSON encoding). The SDK honours the standard variables itself
 * (`OTEL_TRACES_SAMPLER`/`_ARG`, `OTEL_BSP_*`, `OTEL_EXPORTER_OTLP_HEADERS`/`_TIMEOUT`,
 * `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`). The SDK is imported only when tracing is on:
 * with it off, no @opentelemetry module is loaded at all. No global provider is registered; each
 * service hands its Tracer to what makes spans.
 */
import type { Tracer } from '@opentelemetry/api';
import type { Logger } from './logger.js';

export interface Tracing {
  readonly tracer: Tracer;
  /** Where spans are exported. */
  readonly endpoint: string;
  /** Exports what is still queued (bounded by `timeoutMs`), then stops. */
  shutdown(timeoutMs: number): Promise<void>;
}

function isTrue(value: string | undefined): boolean {
  return value?.trim().toLowerCase() === 'true';
}

/** The OTLP/HTTP traces URL the exporter will use, or null when tracing is off. */
export function tracesEndpoint(env: NodeJS.ProcessEnv): string | null {
  if (isTrue(env.OTEL_SDK_DISABLED) || env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() === 'none') return null;
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (traces) return traces;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  return base ? `${base.replace(/\/+$/, '')}/v1/traces` : null;
}

/** Starts the tracer provider of `service` when tracing is configured; null (and nothing loaded) otherwise. */
export async function startTracing(service: 'control-plane' | 'data-plane', env: NodeJS.ProcessEnv, logger: Logger): Promise<Tracing | null> {
  const endpoint = tracesEndpoint(env);
  if (!endpoint) return null;
  const [api, sdk, { OTLPTraceExporter }, resources] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/exporter-trace-otlp-http'),
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
    spanProcessors: [new sdk.BatchSpanProcessor(new OTLPTraceExporter({ url: endpoint }))],
  });
  logger.info({ endpoint, sampler: env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on' }, 'tracing: exporting spans over OTLP/HTTP');
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
