import { ConfigError } from '#proto/env';
import { loadConfig } from './config.js';

describe('loadConfig', () => {
  test('TRUSTED_PROXIES: addresses and CIDR ranges, IPv4 and IPv6', () => {
    expect(loadConfig({ TRUSTED_PROXIES: '10.0.0.0/8,192.0.2.7, 2001:db8::/32' }).trustedProxies).toHaveLength(3);
  });

  test('defaults (SPEC §1 and the process contract)', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      proxyHost: undefined,
      proxyPort: 8080,
      statusHost: undefined,
      statusPort: 8083,
      controlPlaneAddr: '127.0.0.1:8082',
      redisUrl: undefined,
      rateLimitRedisTimeoutMs: 250,
      logLevel: 'info',
      reconnectBackoffBaseMs: 500,
      reconnectBackoffMaxMs: 30_000,
      shutdownTimeoutMs: 10_000,
      shutdownDelayMs: 0,
      snapshotCache: undefined,
      grpcTlsServerName: undefined,
      grpcTls: null,
      grpcJoinToken: undefined,
      grpcInsecure: false,
      accessLog: { enabled: true, sample: 1 },
      workers: 1,
      proxyTls: null,
      tlsReloadIntervalMs: 60_000,
      proxyCacheBytes: 64 * 1024 ** 2,
      trustedProxies: [],
    });
    expect(config.dataplaneId).toMatch(new RegExp(`-${process.pid}$`));
  });

  test('every variable is read', () => {
    expect(
      loadConfig({
        PROXY_HOST: '127.0.0.1',
        PROXY_PORT: '0',
        STATUS_HOST: '::1',
        STATUS_PORT: '9000',
        CONTROL_PLANE_ADDR: 'cp:8082',
        REDIS_URL: 'redis://r:6379',
        RATE_LIMIT_REDIS_TIMEOUT: '2s',
        LOG_LEVEL: 'debug',
        DATAPLANE_ID: 'dp-1',
        RECONNECT_BACKOFF_BASE: '100ms',
        RECONNECT_BACKOFF_MAX: '1s',
        SHUTDOWN_TIMEOUT: '2s',
        SHUTDOWN_DELAY: '5s',
        SNAPSHOT_CACHE: '/tmp/snap.json',
        GRPC_TLS_SERVER_NAME: 'gatehouse-control-plane.gatehouse.svc.cluster.local',
        GRPC_TLS_CA: '/tls/ca.crt',
        GRPC_JOIN_TOKEN: 'join-token-of-the-fleet',
        GRPC_INSECURE: 'false',
        ACCESS_LOG: 'on',
        ACCESS_LOG_SAMPLE: '0.5',
        WORKERS: '3',
        PROXY_TLS_CERT: '/tls/tls.crt',
        PROXY_TLS_KEY: '/tls/tls.key',
        PROXY_TLS_CLIENT_CA: '/tls/client-ca.crt',
        PROXY_TLS_MIN_VERSION: 'TLSv1.3',
        PROXY_HTTP_REDIRECT_PORT: '8088',
        GATEWAY_HTTPS_PORT: '8443',
        PROXY_HTTP2: 'false',
        UPSTREAM_CA_FILE: '/upstream/ca.crt',
        UPSTREAM_TLS_CERT: '/upstream/tls.crt',
        UPSTREAM_TLS_KEY: '/upstream/tls.key',
        TLS_RELOAD_INTERVAL: '30s',
        PROXY_CACHE_SIZE: '256m',
        IDLE_TRIM_AFTER: '30s',
        TRUSTED_PROXIES: '10.0.0.0/8',
      }),
    ).toEqual({
      proxyHost: '127.0.0.1',
      proxyPort: 0,
      statusHost: '::1',
      statusPort: 9000,
      controlPlaneAddr: 'cp:8082',
      redisUrl: 'redis://r:6379',
      rateLimitRedisTimeoutMs: 2000,
      logLevel: 'debug',
      dataplaneId: 'dp-1',
      reconnectBackoffBaseMs: 100,
      reconnectBackoffMaxMs: 1000,
      shutdownTimeoutMs: 2000,
      shutdownDelayMs: 5000,
      snapshotCache: '/tmp/snap.json',
      grpcTlsServerName: 'gatehouse-control-plane.gatehouse.svc.cluster.local',
      grpcTls: { ca: '/tls/ca.crt' },
      grpcJoinToken: 'join-token-of-the-fleet',
      grpcInsecure: false,
      accessLog: { enabled: true, sample: 0.5 },
      workers: 3,
      proxyTls: { cert: '/tls/tls.crt', key: '/tls/tls.key', ca: '/tls/client-ca.crt' },
      proxyTlsMinVersion: 'TLSv1.3',
      upstreamTls: { ca: '/upstream/ca.crt', cert: '/upstream/tls.crt', key: '/upstream/tls.key' },
      proxyHttpRedirectPort: 8088,
      gatewayHttpsPort: 8443,
      gatewayHttp2: false,
      proxyHttp2: false,
      proxyH2c: false,
      tlsReloadIntervalMs: 30_000,
      proxyCacheBytes: 256 * 1024 ** 2,
      idleTrimMs: 30_000,
      trustedProxies: [{ words: [0, 0, 0xffff, 0x0a000000], prefix: 104 }],
    });
  });

  test.each([
    ['mutual TLS', { GRPC_TLS_CA: 'a', GRPC_TLS_CERT: 'c', GRPC_TLS_KEY: 'k' }, { grpcTls: { ca: 'a', cert: 'c', key: 'k' } }],
    ['join token to a loopback CP in plaintext', { GRPC_JOIN_TOKEN: 't' }, { grpcJoinToken: 't', grpcTls: null }],
    ['join token in plaintext, allowed explicitly', { GRPC_JOIN_TOKEN: 't', CONTROL_PLANE_ADDR: 'cp:8082', GRPC_INSECURE: 'true' }, { grpcInsecure: true }],
    ['access log off', { ACCESS_LOG: 'off' }, { accessLog: { enabled: false, sample: 1 } }],
    ['access log sampled', { ACCESS_LOG_SAMPLE: '0.25' }, { accessLog: { enabled: true, sample: 0.25 } }],
    ['access log sample 0', { ACCESS_LOG_SAMPLE: '0' }, { accessLog: { enabled: true, sample: 0 } }],
    ['the Redis timeout at its bound', { RATE_LIMIT_REDIS_TIMEOUT: '10s' }, { rateLimitRedisTimeoutMs: 10_000 }],
    ['no upstream TLS settings', {}, { upstreamTls: null }],
    ['an upstream CA alone', { UPSTREAM_CA_FILE: '/ca.pem' }, { upstreamTls: { ca: '/ca.pem' } }],
    ['an upstream client certificate alone', { UPSTREAM_TLS_CERT: 'c', UPSTREAM_TLS_KEY: 'k' }, { upstreamTls: { cert: 'c', key: 'k' } }],
    ['HTTP/2 by default with TLS', { PROXY_TLS_CERT: 'c', PROXY_TLS_KEY: 'k' }, { proxyHttp2: true }],
    ['HTTP/2 turned off', { PROXY_TLS_CERT: 'c', PROXY_TLS_KEY: 'k', PROXY_HTTP2: 'false' }, { proxyHttp2: false }],
    ['no HTTP/2 without TLS', {}, { proxyHttp2: false }],
    ['no Gateway HTTPS listener by default', {}, { gatewayHttpsPort: null }],
    ['the Gateway HTTPS listener offers h2 without PROXY_TLS_CERT', { GATEWAY_HTTPS_PORT: '8443' }, { gatewayHttpsPort: 8443, gatewayHttp2: true }],
    [
      'TLS without client certificates, TLS 1.2 at least',
      { PROXY_TLS_CERT: 'c', PROXY_TLS_KEY: 'k' },
      { proxyTls: { cert: 'c', key: 'k' }, proxyTlsMinVersion: 'TLSv1.2' },
    ],
    ['PROXY_HTTP2=false without TLS', { PROXY_HTTP2: 'false' }, { proxyHttp2: false }],
    ['h2c by default without TLS', {}, { proxyH2c: true }],
    ['h2c turned off', { PROXY_H2C: 'false' }, { proxyH2c: false }],
    ['no h2c with TLS', { PROXY_TLS_CERT: 'c', PROXY_TLS_KEY: 'k' }, { proxyH2c: false, proxyHttp2: true }],
    ['PROXY_H2C=false with TLS', { PROXY_TLS_CERT: 'c', PROXY_TLS_KEY: 'k', PROXY_H2C: 'false' }, { proxyH2c: false }],
    ['the heap trimmed after 10 s without requests by default', {}, { idleTrimMs: 10_000 }],
    ['never trimmed', { IDLE_TRIM_AFTER: '0s' }, { idleTrimMs: 0 }],
    ['never trimmed, without unit', { IDLE_TRIM_AFTER: '0' }, { idleTrimMs: 0 }],
    ['trimmed after a short idle time', { IDLE_TRIM_AFTER: '1s' }, { idleTrimMs: 1_000 }],
  ])('%s', (_name, env, expected) => {
    expect(loadConfig(env)).toMatchObject(expected);
  });

  test.each([
    ['auto on 2 cores', { WORKERS: 'auto' }, 2, 2],
    ['auto on 1 core', { WORKERS: 'auto' }, 1, 1],
    ['auto on 128 cores, capped', { WORKERS: 'auto' }, 128, 64],
    ['a number, whatever the cores', { WORKERS: '4' }, 2, 4],
    ['empty = the default', { WORKERS: '' }, 8, 1],
  ])('WORKERS: %s', (_name, env, cores, expected) => {
    expect(loadConfig(env, cores).workers).toBe(expected);
  });

  test.each([
    ['a port that is not a number', { PROXY_PORT: 'http' }, 'PROXY_PORT: expected a port number 0-65535, got "http"'],
    ['a port out of range', { STATUS_PORT: '70000' }, 'STATUS_PORT: expected a port number 0-65535, got "70000"'],
    ['a negative port', { PROXY_PORT: '-1' }, 'PROXY_PORT: expected a port number 0-65535, got "-1"'],
    ['a duration without unit', { SHUTDOWN_TIMEOUT: '10' }, 'SHUTDOWN_TIMEOUT'],
    ['a drain delay that is no duration', { SHUTDOWN_DELAY: 'soon' }, 'SHUTDOWN_DELAY'],
    [
      'a max backoff below the base',
      { RECONNECT_BACKOFF_BASE: '2s', RECONNECT_BACKOFF_MAX: '1s' },
      'RECONNECT_BACKOFF_MAX: must not be smaller than RECONNECT_BACKOFF_BASE',
    ],
    ['a proxy certificate without its key', { PROXY_TLS_CERT: '/tls/tls.crt' }, 'PROXY_TLS_CERT: needs PROXY_TLS_KEY (both or neither)'],
    ['a proxy key without its certificate', { PROXY_TLS_KEY: '/tls/tls.key' }, 'PROXY_TLS_KEY: needs PROXY_TLS_CERT (both or neither)'],
    ['a reload interval without unit', { TLS_RELOAD_INTERVAL: '60' }, 'TLS_RELOAD_INTERVAL: expected a duration'],
    [
      'a trusted proxy that is no address or range',
      { TRUSTED_PROXIES: '10.0.0.0/8, lb.internal' },
      'TRUSTED_PROXIES: expected IP addresses and CIDR ranges such as "10.0.0.0/8" or "2001:db8::/32", separated by commas, got "lb.internal"',
    ],
    [
      'a cache size that is not a size',
      { PROXY_CACHE_SIZE: 'lots' },
      'PROXY_CACHE_SIZE: expected a size from "1MB" to "64GB" such as "64MB" or "1G", got "lots"',
    ],
    ['a cache size under 1 MiB', { PROXY_CACHE_SIZE: '512K' }, 'PROXY_CACHE_SIZE: expected a size from "1MB"'],
    ['a cache size over 64 GiB', { PROXY_CACHE_SIZE: '65G' }, 'PROXY_CACHE_SIZE: expected a size from "1MB" to "64GB"'],
    ['a Redis timeout of 0', { RATE_LIMIT_REDIS_TIMEOUT: '0ms' }, 'RATE_LIMIT_REDIS_TIMEOUT: expected a duration'],
    ['a Redis timeout over 10 s', { RATE_LIMIT_REDIS_TIMEOUT: '11s' }, 'RATE_LIMIT_REDIS_TIMEOUT: expected at most 10s, got "11s"'],
    ['a Redis timeout without unit', { RATE_LIMIT_REDIS_TIMEOUT: '300' }, 'RATE_LIMIT_REDIS_TIMEOUT: expected a duration'],
    ['a TLS server name with a port', { GRPC_TLS_SERVER_NAME: 'cp.gatehouse.svc:8082' }, 'GRPC_TLS_SERVER_NAME'],
    ['a TLS server name without TLS', { GRPC_TLS_SERVER_NAME: 'cp.gatehouse.svc' }, 'GRPC_TLS_SERVER_NAME: needs GRPC_TLS_CA'],
    ['a client certificate without CA', { GRPC_TLS_CERT: 'c', GRPC_TLS_KEY: 'k' }, 'GRPC_TLS_CA: is required with GRPC_TLS_CERT and GRPC_TLS_KEY'],
    ['a join token in plaintext to a remote CP', { GRPC_JOIN_TOKEN: 't', CONTROL_PLANE_ADDR: 'cp:8082' }, 'GRPC_JOIN_TOKEN: would travel in plaintext'],
    ['GRPC_INSECURE not a boolean', { GRPC_INSECURE: 'yes' }, 'GRPC_INSECURE: expected "true" or "false", got "yes"'],
    ['ACCESS_LOG not on/off', { ACCESS_LOG: 'true' }, 'ACCESS_LOG: expected "on" or "off"'],
    ['ACCESS_LOG_SAMPLE above 1', { ACCESS_LOG_SAMPLE: '1.5' }, 'ACCESS_LOG_SAMPLE'],
    ['ACCESS_LOG_SAMPLE not a number', { ACCESS_LOG_SAMPLE: 'half' }, 'ACCESS_LOG_SAMPLE'],
    ['LOG_FORMAT unknown', { LOG_FORMAT: 'xml' }, 'LOG_FORMAT: expected "json" or "pretty"'],
    [
      'an unknown OTLP traces protocol',
      { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc/json' },
      'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: expected "http/protobuf", "http/json" or "grpc", got "grpc/json"',
    ],
    ['LOG_LEVEL unknown', { LOG_LEVEL: 'verbose' }, 'LOG_LEVEL: expected one of fatal, error, warn, info, debug, trace, silent, got "verbose"'],
    [
      'PROXY_TLS_CLIENT_CA without TLS',
      { PROXY_TLS_CLIENT_CA: '/ca.crt' },
      'PROXY_TLS_CLIENT_CA: asks clients for certificates over TLS: it needs PROXY_TLS_CERT and PROXY_TLS_KEY',
    ],
    ['PROXY_TLS_MIN_VERSION unknown', { PROXY_TLS_MIN_VERSION: 'TLSv1' }, 'PROXY_TLS_MIN_VERSION: expected "TLSv1.2" or "TLSv1.3", got "TLSv1"'],
    ['PROXY_HTTP2 without TLS', { PROXY_HTTP2: 'true' }, 'PROXY_HTTP2: is offered by TLS ALPN: it needs PROXY_TLS_CERT and PROXY_TLS_KEY'],
    ['PROXY_HTTP2 not a boolean', { PROXY_HTTP2: 'on' }, 'PROXY_HTTP2: expected "true" or "false", got "on"'],
    [
      'PROXY_H2C with TLS',
      { PROXY_TLS_CERT: 'c', PROXY_TLS_KEY: 'k', PROXY_H2C: 'true' },
      'PROXY_H2C: serves HTTP/2 in plain text: with PROXY_TLS_CERT the listener offers h2 by ALPN (PROXY_HTTP2)',
    ],
    ['PROXY_H2C not a boolean', { PROXY_H2C: 'yes' }, 'PROXY_H2C: expected "true" or "false", got "yes"'],
    ['WORKERS 0', { WORKERS: '0' }, 'WORKERS: expected "auto" or a whole number from 1 to 64, got "0"'],
    ['WORKERS above 64', { WORKERS: '65' }, 'WORKERS: expected "auto" or a whole number from 1 to 64, got "65"'],
    ['WORKERS not a whole number', { WORKERS: '1.5' }, 'WORKERS: expected "auto" or a whole number from 1 to 64, got "1.5"'],
    ['WORKERS another word', { WORKERS: 'max' }, 'WORKERS: expected "auto" or a whole number from 1 to 64, got "max"'],
    ['an idle trim without unit', { IDLE_TRIM_AFTER: '30' }, 'IDLE_TRIM_AFTER: expected "0" or a duration'],
  ])('%s is refused, naming the variable', (_name, env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  test('every malformed variable is reported at once, one `NAME: problem` each', () => {
    expect(() => loadConfig({ PROXY_PORT: 'http', SHUTDOWN_TIMEOUT: '10', WORKERS: 'max' })).toThrow(
      'PROXY_PORT: expected a port number 0-65535, got "http"; SHUTDOWN_TIMEOUT: expected a duration such as "500ms" or "30s" (at most 1h), got "10"; ' +
        'WORKERS: expected "auto" or a whole number from 1 to 64, got "max"',
    );
  });

  test('problems relating several variables are reported together too', () => {
    expect(() => loadConfig({ PROXY_HTTP2: 'true', GRPC_TLS_SERVER_NAME: 'cp.gatehouse.svc' })).toThrow(
      'PROXY_HTTP2: is offered by TLS ALPN: it needs PROXY_TLS_CERT and PROXY_TLS_KEY; GRPC_TLS_SERVER_NAME: needs GRPC_TLS_CA',
    );
  });
});
