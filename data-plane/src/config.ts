/**
 * Data-plane configuration from environment variables (docs/configuration.md "Configuration" plus the process contract).
 * Read once by main.ts; everything else receives the values it needs.
 */
import { availableParallelism, hostname } from 'node:os';
import { z } from 'zod';
import { parseSize } from '#proto/plugins/body-limit';
import { certificatePairFromEnv, type CertificatePaths } from '#proto/certificate-files';
import { boolean, duration, durationOrZero, envProblem, oneOf, parseEnv, port, text, variable } from '#proto/env';
import { upstreamTlsFromEnv, type UpstreamTlsPaths } from './proxy/upstream-tls.js';
import { clientTlsFromEnv, hostOfAddress, isLoopbackHost, type ClientTlsFiles } from '#proto/grpc';
import { LOG_FORMAT, LOG_LEVEL } from '#proto/logger';
import { traceExport } from '#proto/tracing';
import type { AccessLogConfig } from './proxy/access-log.js';
import { TRUSTED_PROXIES, type TrustedProxies } from './plugins/client-ip.js';

export interface DataPlaneConfig {
  /** Bind address; undefined = every interface (Node's default, IPv4 and IPv6). */
  proxyHost: string | undefined;
  proxyPort: number;
  statusHost: string | undefined;
  statusPort: number;
  /** `host:port` of the control plane's gRPC listener. */
  controlPlaneAddr: string;
  /** Unset = in-process token store. */
  redisUrl: string | undefined;
  /** RATE_LIMIT_REDIS_TIMEOUT: how long a rate_limit decision waits for Redis before deciding in-process. */
  rateLimitRedisTimeoutMs: number;
  logLevel: string;
  dataplaneId: string;
  reconnectBackoffBaseMs: number;
  reconnectBackoffMaxMs: number;
  shutdownTimeoutMs: number;
  /** SHUTDOWN_DELAY: after SIGTERM the proxy still accepts and serves this long, closing each connection after its answer. */
  shutdownDelayMs: number;
  /** Optional file holding the last applied snapshot, served at cold start. */
  snapshotCache: string | undefined;
  /** GRPC_TLS_SERVER_NAME: verify the CP certificate against this name instead of the dialled host. */
  grpcTlsServerName: string | undefined;
  /** GRPC_TLS_CA (+ GRPC_TLS_CERT/KEY = mutual TLS); null = plaintext. */
  grpcTls: ClientTlsFiles | null;
  /** GRPC_JOIN_TOKEN: presented to the control plane as call metadata. */
  grpcJoinToken: string | undefined;
  /** GRPC_INSECURE=true: a join token may be sent in plaintext to a non-loopback control plane. */
  grpcInsecure: boolean;
  /** ACCESS_LOG (default on) and ACCESS_LOG_SAMPLE (default 1: every request). */
  accessLog: AccessLogConfig;
  /** WORKERS: proxy processes sharing PROXY_PORT (1 = no cluster, the single process of old). */
  workers: number;
  /** PROXY_TLS_CERT / PROXY_TLS_KEY: the proxy listener serves HTTPS; null = plain HTTP. `ca`: PROXY_TLS_CLIENT_CA (clients must present a certificate it signed). */
  proxyTls: CertificatePaths | null;
  /** PROXY_TLS_MIN_VERSION: the oldest TLS version the proxy listener accepts. */
  proxyTlsMinVersion: 'TLSv1.2' | 'TLSv1.3';
  /** PROXY_HTTP2 (default true): with PROXY_TLS_CERT, h2 is offered by ALPN beside HTTP/1.1 (proxy/http2.ts). */
  proxyHttp2: boolean;
  /** PROXY_H2C (default true): without PROXY_TLS_CERT, a connection opening with the HTTP/2 preface is served h2 (proxy/http2.ts). */
  proxyH2c: boolean;
  /** PROXY_HTTP_REDIRECT_PORT: a plain listener that redirects every request to HTTPS (proxy/https-redirect.ts); null = none. */
  proxyHttpRedirectPort: number | null;
  /** GATEWAY_HTTPS_PORT: a TLS listener serving the Gateway API HTTPS listeners the snapshot carries (proxy/listener.ts); null = none. */
  gatewayHttpsPort: number | null;
  /** PROXY_HTTP2 (default true): on GATEWAY_HTTPS_PORT, h2 is offered by ALPN beside HTTP/1.1. */
  gatewayHttp2: boolean;
  /** UPSTREAM_CA_FILE, UPSTREAM_TLS_CERT / UPSTREAM_TLS_KEY (proxy/upstream-tls.ts); null = Node's defaults. */
  upstreamTls: UpstreamTlsPaths | null;
  /** TLS_RELOAD_INTERVAL: how often the proxy's certificate files are re-read (SIGHUP re-reads at once). */
  tlsReloadIntervalMs: number;
  /** PROXY_CACHE_SIZE: bytes proxy_cache may hold in this process (each worker has its own). */
  proxyCacheBytes: number;
  /** IDLE_TRIM_AFTER: no request for this long → the heap is trimmed (memory/idle-trim.ts); 0 = never. */
  idleTrimMs: number;
  /** TRUSTED_PROXIES: the proxies in front whose X-Forwarded-For/-Proto/-Host are believed (plugins/client-ip.ts); empty = none. */
  trustedProxies: TrustedProxies;
}

/** A bound against typos (`WORKERS=800`): every worker holds its own routing table and control-plane stream. */
const MAX_WORKERS = 64;

const MAX_RATE_LIMIT_REDIS_TIMEOUT_MS = 10_000;

/** PROXY_CACHE_SIZE bounds: below 1 MiB an entry of the default max_entry_size would not fit; past 64 GiB it is a typo. */
const MIN_PROXY_CACHE_BYTES = 1024 ** 2;
const MAX_PROXY_CACHE_BYTES = 64 * 1024 ** 3;

/** The settings naming the proxy listener's certificate and key (in errors and reload warnings). */
export const PROXY_TLS_NAMES = { cert: 'PROXY_TLS_CERT', key: 'PROXY_TLS_KEY', ca: 'PROXY_TLS_CLIENT_CA' } as const;

/** The data plane's variables, each alone; loadConfig relates them. */
const DATA_PLANE_ENV = z.object({
  PROXY_HOST: text(),
  PROXY_PORT: port(8080),
  STATUS_HOST: text(),
  STATUS_PORT: port(8083),
  CONTROL_PLANE_ADDR: text('127.0.0.1:8082'),
  REDIS_URL: text(),
  RATE_LIMIT_REDIS_TIMEOUT: duration('250ms'),
  LOG_LEVEL,
  LOG_FORMAT,
  DATAPLANE_ID: text(),
  RECONNECT_BACKOFF_BASE: duration('500ms'),
  RECONNECT_BACKOFF_MAX: duration('30s'),
  SHUTDOWN_TIMEOUT: duration('10s'),
  // Unset or zero ("0s"): none, the drain starts at SIGTERM.
  SHUTDOWN_DELAY: durationOrZero('0s'),
  // Zero: the heap is never trimmed.
  IDLE_TRIM_AFTER: durationOrZero('10s'),
  SNAPSHOT_CACHE: text(),
  GRPC_TLS_SERVER_NAME: variable('a DNS name', (s) => (/^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$/.test(s) ? s : null), undefined),
  GRPC_JOIN_TOKEN: text(),
  GRPC_INSECURE: boolean(false),
  ACCESS_LOG: oneOf(['on', 'off'], 'on'),
  ACCESS_LOG_SAMPLE: variable('a number from 0 to 1', (s) => (/^\d*\.?\d+$/.test(s) && Number(s) <= 1 ? Number(s) : null), 1),
  WORKERS: variable<number | 'auto'>(
    `"auto" or a whole number from 1 to ${MAX_WORKERS}`,
    (s) => (s === 'auto' ? s : /^\d+$/.test(s) && Number(s) >= 1 && Number(s) <= MAX_WORKERS ? Number(s) : null),
    1,
  ),
  PROXY_TLS_MIN_VERSION: oneOf(['TLSv1.2', 'TLSv1.3'], 'TLSv1.2'),
  PROXY_HTTP2: boolean(true),
  PROXY_H2C: boolean(true),
  PROXY_HTTP_REDIRECT_PORT: port(null),
  GATEWAY_HTTPS_PORT: port(null),
  TLS_RELOAD_INTERVAL: duration('1m'),
  PROXY_CACHE_SIZE: variable(
    'a size from "1MB" to "64GB" such as "64MB" or "1G"',
    (s) => {
      const bytes = parseSize(s);
      return bytes !== null && bytes >= MIN_PROXY_CACHE_BYTES && bytes <= MAX_PROXY_CACHE_BYTES ? bytes : null;
    },
    64 * 1024 ** 2,
  ),
  TRUSTED_PROXIES,
});

/** Throws a ConfigError naming every malformed variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, cores = availableParallelism()): DataPlaneConfig {
  return parseEnv(env, DATA_PLANE_ENV, (vars, checks) => {
    const grpcTls = checks.attempt(() => clientTlsFromEnv(env)) ?? null;
    const proxyTls = checks.attempt(() => proxyTlsOf(env)) ?? null;
    checks.attempt(() => traceExport(env)); // an unknown OTLP protocol fails the start here, named like any other setting
    const config: DataPlaneConfig = {
      proxyHost: vars.PROXY_HOST,
      proxyPort: vars.PROXY_PORT,
      statusHost: vars.STATUS_HOST,
      statusPort: vars.STATUS_PORT,
      controlPlaneAddr: vars.CONTROL_PLANE_ADDR,
      redisUrl: vars.REDIS_URL,
      rateLimitRedisTimeoutMs: vars.RATE_LIMIT_REDIS_TIMEOUT,
      logLevel: vars.LOG_LEVEL,
      dataplaneId: vars.DATAPLANE_ID ?? `${hostname()}-${process.pid}`,
      reconnectBackoffBaseMs: vars.RECONNECT_BACKOFF_BASE,
      reconnectBackoffMaxMs: vars.RECONNECT_BACKOFF_MAX,
      shutdownTimeoutMs: vars.SHUTDOWN_TIMEOUT,
      shutdownDelayMs: vars.SHUTDOWN_DELAY,
      idleTrimMs: vars.IDLE_TRIM_AFTER,
      snapshotCache: vars.SNAPSHOT_CACHE,
      grpcTlsServerName: vars.GRPC_TLS_SERVER_NAME,
      grpcTls,
      grpcJoinToken: vars.GRPC_JOIN_TOKEN,
      grpcInsecure: vars.GRPC_INSECURE,
      accessLog: { enabled: vars.ACCESS_LOG === 'on', sample: vars.ACCESS_LOG_SAMPLE },
      workers: vars.WORKERS === 'auto' ? Math.min(cores, MAX_WORKERS) : vars.WORKERS,
      proxyTls,
      proxyTlsMinVersion: vars.PROXY_TLS_MIN_VERSION,
      upstreamTls: checks.attempt(() => upstreamTlsFromEnv(env)) ?? null,
      // Plain text has no ALPN: h2 there is PROXY_H2C's, told apart by the connection's first bytes.
      proxyHttp2: proxyTls !== null && vars.PROXY_HTTP2,
      proxyH2c: proxyTls === null && vars.PROXY_H2C,
      proxyHttpRedirectPort: vars.PROXY_HTTP_REDIRECT_PORT,
      gatewayHttpsPort: vars.GATEWAY_HTTPS_PORT,
      gatewayHttp2: vars.PROXY_HTTP2,
      tlsReloadIntervalMs: vars.TLS_RELOAD_INTERVAL,
      proxyCacheBytes: vars.PROXY_CACHE_SIZE,
      trustedProxies: vars.TRUSTED_PROXIES,
    };
    if (env.PROXY_HTTP2 === 'true' && !proxyTls) checks.fail('PROXY_HTTP2', 'is offered by TLS ALPN: it needs PROXY_TLS_CERT and PROXY_TLS_KEY');
    if (env.PROXY_H2C === 'true' && proxyTls) {
      checks.fail('PROXY_H2C', 'serves HTTP/2 in plain text: with PROXY_TLS_CERT the listener offers h2 by ALPN (PROXY_HTTP2)');
    }
    if (config.proxyHttpRedirectPort !== null && !proxyTls) {
      checks.fail('PROXY_HTTP_REDIRECT_PORT', 'redirects to HTTPS: it needs PROXY_TLS_CERT and PROXY_TLS_KEY');
    }
    if (config.grpcTlsServerName && !grpcTls) checks.fail('GRPC_TLS_SERVER_NAME', 'needs GRPC_TLS_CA');
    if (config.grpcJoinToken && !grpcTls && !config.grpcInsecure && !isLoopbackHost(hostOfAddress(config.controlPlaneAddr))) {
      checks.fail(
        'GRPC_JOIN_TOKEN',
        `would travel in plaintext to CONTROL_PLANE_ADDR ${config.controlPlaneAddr}: set GRPC_TLS_CA (the CA of the control plane certificate), or GRPC_INSECURE=true`,
      );
    }
    // Every request of a `policy: redis` route may wait this long: past 10 s it is a typo, not a choice.
    if (config.rateLimitRedisTimeoutMs > MAX_RATE_LIMIT_REDIS_TIMEOUT_MS) {
      checks.fail('RATE_LIMIT_REDIS_TIMEOUT', `expected at most ${MAX_RATE_LIMIT_REDIS_TIMEOUT_MS / 1000}s, got "${env.RATE_LIMIT_REDIS_TIMEOUT}"`);
    }
    if (config.reconnectBackoffMaxMs < config.reconnectBackoffBaseMs) checks.fail('RECONNECT_BACKOFF_MAX', 'must not be smaller than RECONNECT_BACKOFF_BASE');
    return config;
  });
}

/** PROXY_TLS_CERT / _KEY, and PROXY_TLS_CLIENT_CA, which only a TLS listener can ask for. */
function proxyTlsOf(env: NodeJS.ProcessEnv): CertificatePaths | null {
  const pair = certificatePairFromEnv(env, PROXY_TLS_NAMES);
  const ca = env.PROXY_TLS_CLIENT_CA || undefined;
  if (ca && !pair) throw envProblem('PROXY_TLS_CLIENT_CA', 'asks clients for certificates over TLS: it needs PROXY_TLS_CERT and PROXY_TLS_KEY');
  return pair && ca ? { ...pair, ca } : pair;
}
