/**
 * OpenTelemetry tracing for both services: on only when an OTLP endpoint is configured
 * (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT`), spans then go in batches
 * over OTLP in the protocol `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL` names:
 * `http/protobuf` (the specification's default), `http/json` or `grpc`. Which traces are recorded is
 * `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` (traceSampler, read here so that a bad value fails the
 * start); batches follow `OTEL_BSP_*` (span-queue.ts). The exporter honours its own variables
 * (`OTEL_EXPORTER_OTLP_HEADERS`/`_TIMEOUT`), the resource `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`.
 * The SDK is imported only when tracing is on: with it off, no @opentelemetry module is loaded at all.
 * No global provider is registered; each service hands its Tracer to what makes spans.
 */
import type { Tracer } from '@opentelemetry/api';
import type { Sampler, SpanExporter } from '@opentelemetry/sdk-trace-base';
import { envProblem } from './env.js';
import type { Logger } from './logger.js';
import { spanQueueSettings, type DropReason } from './span-queue.js';
import { newSpanId, newTraceId } from './traceparent.js';

export interface Tracing {
  readonly tracer: Tracer;
  /**
   * Whether a span with this trace id, under a remote parent whose sampled flag is `parentSampled` (null: a
   * new trace), is recorded: the configured sampler's decision, taken before any span exists, so that an
   * unsampled request builds none. The tracer takes the same decision again on a span started for it.
   */
  sampled(parentSampled: boolean | null, traceId: string): boolean;
  /** The trace id of the next root span the tracer starts (its sampling decision was taken on that id); else a random one. */
  nextRootTraceId(traceId: string): void;
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

/** OTEL_TRACES_SAMPLER's values that Gatehouse knows, as the OpenTelemetry specification names them. */
const SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const;
export type SamplerName = (typeof SAMPLERS)[number];

/** The sampler, with the ratio of the traceidratio ones (1 for the others). */
export interface TraceSampler {
  name: SamplerName;
  ratio: number;
}

/** The specification's default, kept: a trace is recorded whole or not at all, whichever service started it. */
export const DEFAULT_SAMPLER: SamplerName = 'parentbased_always_on';

/**
 * The sampler OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG configure. Throws, naming the variable, for an
 * unknown sampler or a ratio that is not a number from 0 to 1 (the SDK would fall back to its default silently).
 * An empty variable is unset; the argument of a sampler without a ratio is ignored, as the specification says.
 */
export function traceSampler(env: NodeJS.ProcessEnv): TraceSampler {
  const value = env.OTEL_TRACES_SAMPLER?.trim() || DEFAULT_SAMPLER;
  if (!(SAMPLERS as readonly string[]).includes(value)) {
    throw envProblem('OTEL_TRACES_SAMPLER', `expected one of ${SAMPLERS.join(', ')}, got "${value}"`);
  }
  const name = value as SamplerName;
  const arg = env.OTEL_TRACES_SAMPLER_ARG?.trim();
  if (!name.endsWith('traceidratio') || !arg) return { name, ratio: 1 };
  const ratio = Number(arg);
  if (!/^[0-9.e+-]+$/i.test(arg) || !(ratio >= 0 && ratio <= 1)) {
    throw envProblem('OTEL_TRACES_SAMPLER_ARG', `expected a number from 0 to 1 (the share of traces ${name} records), got "${arg}"`);
  }
  return { name, ratio };
}

function isTrue(value: string | undefined): boolean {
  return value?.trim().toLowerCase() === 'true';
}

function protocolOf(env: NodeJS.ProcessEnv): OtlpProtocol {
  const variable = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim() ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const value = env[variable]?.trim() || 'http/protobuf';
  if (!Object.hasOwn(EXPORTERS, value)) {
    const names = Object.keys(EXPORTERS).map((p) => `"${p}"`);
    throw envProblem(variable, `expected ${names.slice(0, -1).join(', ')} or ${names.at(-1)}, got "${value}"`);
  }
  return value as OtlpProtocol;
}

/**
 * The trace export the variables configure, or null when tracing is off. Throws, naming the variable,
 * for an unknown protocol, sampler or batch setting, with tracing off too (each service's loadConfig calls it,
 * so the start fails as for any bad setting).
 */
export function traceExport(env: NodeJS.ProcessEnv): TraceExport | null {
  const protocol = protocolOf(env);
  traceSampler(env);
  spanQueueSettings(env);
  if (isTrue(env.OTEL_SDK_DISABLED) || env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() === 'none') return null;
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (traces) return { endpoint: traces, protocol };
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!base) return null;
  // Over HTTP each signal has its path under the base URL; gRPC names the service in the call, not the URL.
  return { endpoint: protocol === 'grpc' ? base : `${base.replace(/\/+$/, '')}/v1/traces`, protocol };
}

export interface TracingOptions {
  /** Called with the spans lost: the queue full (the exporter behind), or a batch the exporter could not deliver. */
  dropped?: (reason: DropReason, spans: number) => void;
}

export async function startTracing(
  service: 'control-plane' | 'data-plane',
  env: NodeJS.ProcessEnv,
  logger: Logger,
  options: TracingOptions = {},
): Promise<Tracing | null> {
  const settings = traceExport(env);
  if (!settings) return null;
  const { endpoint, protocol } = settings;
  const sampling = traceSampler(env);
  const [api, sdk, Exporter, resources, { SpanQueue }] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-trace-base'),
    EXPORTERS[protocol](),
    import('@opentelemetry/resources'),
    import('./span-queue.js'),
  ]);
  // Export failures would otherwise go unseen: the SDK reports them on its diagnostic channel.
  const warn = (message: string) => logger.warn({ component: 'opentelemetry' }, message);
  api.diag.setLogger({ error: warn, warn, info: () => undefined, debug: () => undefined, verbose: () => undefined }, api.DiagLogLevel.WARN);
  const resource = resources
    .defaultResource()
    .merge(resources.resourceFromAttributes({ 'service.name': `gatehouse-${service}` }))
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));

  const ratio = new sdk.TraceIdRatioBasedSampler(sampling.ratio);
  const root: Sampler = sampling.name.endsWith('always_on')
    ? new sdk.AlwaysOnSampler()
    : sampling.name.endsWith('always_off')
      ? new sdk.AlwaysOffSampler()
      : ratio;
  const parentBased = sampling.name.startsWith('parentbased_');
  const rootSampled = sampling.name.endsWith('always_on')
    ? () => true
    : sampling.name.endsWith('always_off')
      ? () => false
      : (traceId: string) => ratio.shouldSample(api.ROOT_CONTEXT, traceId).decision === sdk.SamplingDecision.RECORD_AND_SAMPLED;
  // Ids from the process's pool of random bytes; a root span's trace id the one its sampling decision was taken on.
  let nextTraceId: string | null = null;
  const idGenerator = {
    generateTraceId(): string {
      const id = nextTraceId ?? newTraceId();
      nextTraceId = null;
      return id;
    },
    generateSpanId: newSpanId,
  };
  const queue = new SpanQueue(new Exporter({ url: endpoint }), spanQueueSettings(env), options.dropped ?? (() => undefined), warn);
  const provider = new sdk.BasicTracerProvider({
    resource,
    sampler: parentBased ? new sdk.ParentBasedSampler({ root }) : root,
    idGenerator,
    spanProcessors: [queue],
  });
  logger.info(
    { endpoint, protocol, sampler: sampling.name, ...(sampling.name.endsWith('traceidratio') && { samplerRatio: sampling.ratio }) },
    'tracing: exporting spans over OTLP',
  );
  return {
    tracer: provider.getTracer('gatehouse'),
    sampled: parentBased ? (parentSampled, traceId) => parentSampled ?? rootSampled(traceId) : (_parentSampled, traceId) => rootSampled(traceId),
    nextRootTraceId(traceId) {
      nextTraceId = traceId;
    },
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
