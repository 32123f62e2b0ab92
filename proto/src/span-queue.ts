/**
 * The span processor of both services: ended spans wait in a bounded queue and go to the exporter in
 * batches, one export at a time. The code that ends a span never waits: when the exporter falls behind and
 * the queue is full, the span is dropped and counted, as is every span of a batch the exporter could not
 * deliver. Sizes and delays are the specification's `OTEL_BSP_*` variables, with its defaults. Imports
 * nothing of OpenTelemetry at run time, so tracing.ts can check the variables with tracing off.
 */
import type { ReadableSpan, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { envProblem } from './env.js';

export type DropReason = 'queue_full' | 'export_failed';

export interface SpanQueueSettings {
  maxQueueSize: number;
  maxExportBatchSize: number;
  scheduleDelayMs: number;
  exportTimeoutMs: number;
}

/** TraceFlags.SAMPLED and ExportResultCode.SUCCESS of @opentelemetry/api and core, not imported (see above). */
const SAMPLED = 1;
const SUCCESS = 0;

const VARIABLES: ReadonlyArray<[keyof SpanQueueSettings, string, number, number]> = [
  ['maxQueueSize', 'OTEL_BSP_MAX_QUEUE_SIZE', 2048, 1],
  ['maxExportBatchSize', 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512, 1],
  ['scheduleDelayMs', 'OTEL_BSP_SCHEDULE_DELAY', 5000, 0],
  ['exportTimeoutMs', 'OTEL_BSP_EXPORT_TIMEOUT', 30000, 1],
];

/** The OTEL_BSP_* settings; throws, naming the variable, for a value that is not a whole number in range. */
export function spanQueueSettings(env: NodeJS.ProcessEnv): SpanQueueSettings {
  const settings = {} as SpanQueueSettings;
  for (const [key, variable, fallback, min] of VARIABLES) {
    const value = env[variable]?.trim();
    const n = value ? Number(value) : fallback;
    if (!Number.isSafeInteger(n) || n < min) throw envProblem(variable, `expected a whole number of at least ${min}, got "${value}"`);
    settings[key] = n;
  }
  // As the specification says: a batch no larger than the queue.
  settings.maxExportBatchSize = Math.min(settings.maxExportBatchSize, settings.maxQueueSize);
  return settings;
}

export class SpanQueue implements SpanProcessor {
  private spans: ReadableSpan[] = [];
  private timer: NodeJS.Timeout | null = null;
  private immediate: NodeJS.Immediate | null = null;
  private inFlight: Promise<void> | null = null;
  private closed = false;
  /** Set once drops were reported in the log, until an export succeeds again: one line per episode, not per span. */
  private dropping = false;

  constructor(
    private readonly exporter: SpanExporter,
    private readonly settings: SpanQueueSettings,
    private readonly dropped: (reason: DropReason, spans: number) => void,
    private readonly warn: (message: string) => void,
  ) {}

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    if (this.closed || (span.spanContext().traceFlags & SAMPLED) === 0) return;
    if (this.spans.length >= this.settings.maxQueueSize) {
      this.dropped('queue_full', 1);
      if (!this.dropping) {
        this.dropping = true;
        this.warn(
          `span queue full (OTEL_BSP_MAX_QUEUE_SIZE ${this.settings.maxQueueSize}): the exporter is behind, spans are dropped and counted in gatehouse_trace_spans_dropped_total`,
        );
      }
      return;
    }
    this.spans.push(span);
    this.arm();
  }

  /** A full batch goes as soon as no export is in flight; fewer spans wait for the schedule delay. */
  private arm(): void {
    if (this.inFlight !== null || this.immediate !== null || this.spans.length === 0) return;
    if (this.spans.length >= this.settings.maxExportBatchSize) {
      if (this.timer !== null) clearTimeout(this.timer);
      this.timer = null;
      this.immediate = setImmediate(() => {
        this.immediate = null;
        void this.exportBatch();
      });
    } else if (this.timer === null) {
      this.timer = setTimeout(() => {
        this.timer = null;
        void this.exportBatch();
      }, this.settings.scheduleDelayMs);
      this.timer.unref();
    }
  }

  private exportBatch(): Promise<void> {
    if (this.inFlight !== null) return this.inFlight;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    const batch = this.spans.splice(0, this.settings.maxExportBatchSize);
    if (batch.length === 0) return Promise.resolve();
    this.inFlight = this.send(batch).finally(() => {
      this.inFlight = null;
      this.arm();
    });
    return this.inFlight;
  }

  private send(batch: ReadableSpan[]): Promise<void> {
    return new Promise((resolve) => {
      let finished = false;
      const done = (error: string | null) => {
        if (finished) return;
        finished = true;
        clearTimeout(timer);
        if (error === null) this.dropping = false;
        else {
          this.dropped('export_failed', batch.length);
          this.warn(`span export failed, ${batch.length} spans dropped: ${error}`);
        }
        resolve();
      };
      const timer = setTimeout(() => done(`no answer within OTEL_BSP_EXPORT_TIMEOUT (${this.settings.exportTimeoutMs} ms)`), this.settings.exportTimeoutMs);
      timer.unref();
      try {
        this.exporter.export(batch, (result) => done(result.code === SUCCESS ? null : String(result.error ?? 'the exporter failed')));
      } catch (err) {
        done(String(err));
      }
    });
  }

  async forceFlush(): Promise<void> {
    while (this.inFlight !== null || this.spans.length > 0) await this.exportBatch();
  }

  async shutdown(): Promise<void> {
    this.closed = true;
    if (this.immediate !== null) clearImmediate(this.immediate);
    this.immediate = null;
    await this.forceFlush();
    await this.exporter.shutdown();
  }
}
