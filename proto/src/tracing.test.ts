import { spanQueueSettings } from './span-queue.js';
import { traceExport, traceSampler } from './tracing.js';

describe('traceExport: where and how spans go, from the standard OpenTelemetry variables', () => {
  test.each<[string, NodeJS.ProcessEnv, ReturnType<typeof traceExport>]>([
    ['no endpoint: tracing off', { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, null],
    ['an empty endpoint: off', { OTEL_EXPORTER_OTLP_ENDPOINT: ' ' }, null],
    [
      'the base endpoint, protobuf over HTTP by default',
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' },
      { endpoint: 'http://c:4318/v1/traces', protocol: 'http/protobuf' },
    ],
    [
      'JSON over HTTP',
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' },
      { endpoint: 'http://c:4318/v1/traces', protocol: 'http/json' },
    ],
    [
      'gRPC: the base endpoint as it is',
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
      { endpoint: 'http://c:4317', protocol: 'grpc' },
    ],
    [
      'the traces variables win over the general ones',
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:9000/traces',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      },
      { endpoint: 'http://t:9000/traces', protocol: 'http/json' },
    ],
    ['OTEL_SDK_DISABLED', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'TRUE' }, null],
    ['OTEL_TRACES_EXPORTER=none', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }, null],
  ])('%s', (_name, env, expected) => {
    expect(traceExport(env)).toEqual(expected);
  });

  test.each([
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'http' }, 'OTEL_EXPORTER_OTLP_PROTOCOL: expected "http/protobuf", "http/json" or "grpc", got "http"'],
    [{ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'HTTP/PROTOBUF', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: expected'],
  ])('an unknown protocol is refused, naming the variable, even with tracing off: %j', (env, message) => {
    expect(() => traceExport(env)).toThrow(message);
  });
});

describe('traceSampler: OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG', () => {
  test.each<[NodeJS.ProcessEnv, ReturnType<typeof traceSampler>]>([
    [{}, { name: 'parentbased_always_on', ratio: 1 }],
    [
      { OTEL_TRACES_SAMPLER: ' ', OTEL_TRACES_SAMPLER_ARG: '' },
      { name: 'parentbased_always_on', ratio: 1 },
    ],
    [{ OTEL_TRACES_SAMPLER: 'always_off' }, { name: 'always_off', ratio: 1 }],
    [
      { OTEL_TRACES_SAMPLER: 'always_on', OTEL_TRACES_SAMPLER_ARG: 'ignored' },
      { name: 'always_on', ratio: 1 },
    ],
    [{ OTEL_TRACES_SAMPLER: 'parentbased_always_off' }, { name: 'parentbased_always_off', ratio: 1 }],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio' }, { name: 'traceidratio', ratio: 1 }],
    [
      { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01' },
      { name: 'parentbased_traceidratio', ratio: 0.01 },
    ],
    [
      { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' },
      { name: 'traceidratio', ratio: 0 },
    ],
    [
      { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '1e-3' },
      { name: 'traceidratio', ratio: 0.001 },
    ],
  ])('%j', (env, expected) => {
    expect(traceSampler(env)).toEqual(expected);
  });

  test.each([
    [
      { OTEL_TRACES_SAMPLER: 'jaeger_remote' },
      'OTEL_TRACES_SAMPLER: expected one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio, got "jaeger_remote"',
    ],
    [{ OTEL_TRACES_SAMPLER: 'AlwaysOn' }, 'got "AlwaysOn"'],
    [
      { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '-0.1' },
      'OTEL_TRACES_SAMPLER_ARG: expected a number from 0 to 1 (the share of traces traceidratio records), got "-0.1"',
    ],
    [{ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0x1' }, 'got "0x1"'],
    [{ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: 'NaN' }, 'got "NaN"'],
  ])('refused, naming the variable, with tracing off too: %j', (env, message) => {
    expect(() => traceSampler(env)).toThrow(message);
    expect(() => traceExport(env)).toThrow(message);
  });
});

describe('spanQueueSettings: OTEL_BSP_*', () => {
  test("the specification's defaults", () => {
    expect(spanQueueSettings({})).toEqual({ maxQueueSize: 2048, maxExportBatchSize: 512, scheduleDelayMs: 5000, exportTimeoutMs: 30000 });
  });

  test('set values; a batch no larger than the queue', () => {
    expect(
      spanQueueSettings({ OTEL_BSP_MAX_QUEUE_SIZE: '100', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '500', OTEL_BSP_SCHEDULE_DELAY: '0', OTEL_BSP_EXPORT_TIMEOUT: '10' }),
    ).toEqual({
      maxQueueSize: 100,
      maxExportBatchSize: 100,
      scheduleDelayMs: 0,
      exportTimeoutMs: 10,
    });
  });

  test.each([
    [{ OTEL_BSP_MAX_QUEUE_SIZE: '0' }, 'OTEL_BSP_MAX_QUEUE_SIZE: expected a whole number of at least 1, got "0"'],
    [{ OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '1.5' }, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE: expected a whole number of at least 1, got "1.5"'],
    [{ OTEL_BSP_SCHEDULE_DELAY: '5s' }, 'OTEL_BSP_SCHEDULE_DELAY: expected a whole number of at least 0, got "5s"'],
  ])('refused, naming the variable: %j', (env, message) => {
    expect(() => spanQueueSettings(env)).toThrow(message);
    expect(() => traceExport(env)).toThrow(message);
  });
});
