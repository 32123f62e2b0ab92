import { traceExport } from './tracing.js';

describe('traceExport: where and how spans go, from the standard OpenTelemetry variables', () => {
  test.each<[string, NodeJS.ProcessEnv, ReturnType<typeof traceExport>]>([
    ['no endpoint: tracing off', { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, null],
    ['an empty endpoint: off', { OTEL_EXPORTER_OTLP_ENDPOINT: ' ' }, null],
    ['the base endpoint, protobuf over HTTP by default', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' }, { endpoint: 'http://c:4318/v1/traces', protocol: 'http/protobuf' }],
    ['JSON over HTTP', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }, { endpoint: 'http://c:4318/v1/traces', protocol: 'http/json' }],
    ['gRPC: the base endpoint as it is', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, { endpoint: 'http://c:4317', protocol: 'grpc' }],
    [
      'the traces variables win over the general ones',
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:9000/traces', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' },
      { endpoint: 'http://t:9000/traces', protocol: 'http/json' },
    ],
    ['OTEL_SDK_DISABLED', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'TRUE' }, null],
    ['OTEL_TRACES_EXPORTER=none', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }, null],
  ])('%s', (_name, env, expected) => {
    expect(traceExport(env)).toEqual(expected);
  });

  test.each([
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'http' }, 'OTEL_EXPORTER_OTLP_PROTOCOL must be "http/protobuf", "http/json" or "grpc", got "http"'],
    [{ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'HTTP/PROTOBUF', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL must be'],
  ])('an unknown protocol is refused, naming the variable, even with tracing off: %j', (env, message) => {
    expect(() => traceExport(env)).toThrow(message);
  });
});
