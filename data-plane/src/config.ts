/**
 * Data-plane configuration from environment variables (docs/configuration.md "Configuration" plus the process contract).
 * Read once by main.ts; everything else receives the values it needs.
 */
import { availableParallelism, hostname } from 'node:os';
import { parseDuration } from '#proto/duration';
import { parseSize } from '#proto/plugins/body-limit';
import { certificatePairFromEnv, type CertificatePaths } from '#proto/certificate-files';
import { upstreamTlsFromEnv, type UpstreamTlsPaths } from './proxy/upstream-tls.js';
import { clientTlsFromEnv, hostOfAddress, isLoopbackHost, type ClientTlsFiles } from '#proto/grpc';
import { logFormatOf, logLevelOf } from '#proto/logger';
import { traceExport } from '#proto/tracing';
import type { AccessLogConfig } from './proxy/access-log.js';
import { parseTrustedProxies, type TrustedProxies } from './plugins/client-ip.js';

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

function port(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value > 65535) throw new Error(`${name} must be a port number (0-65535), got "${raw}"`);
  return value;
}

function duration(env: NodeJS.ProcessEnv, name: string, fallback: string): number {
  const raw = env[name] || fallback;
  try {
    return parseDuration(raw);
  } catch (err) {
    throw new Error(`${name} must be a duration such as "500ms" or "30s", got "${raw}"`, { cause: err });
  }
}

function grpcTls(env: NodeJS.ProcessEnv): ClientTlsFiles | null {
  try {
    return clientTlsFromEnv(env);
  } catch (err) {
    throw new Error(`GRPC_TLS_CA is incomplete: ${(err as Error).message}`, { cause: err });
  }
}

function accessLog(env: NodeJS.ProcessEnv): AccessLogConfig {
  const enabled = env.ACCESS_LOG || 'on';
  if (enabled !== 'on' && enabled !== 'off') throw new Error(`ACCESS_LOG must be "on" or "off", got "${enabled}"`);
  const sample = env.ACCESS_LOG_SAMPLE || '1';
  const value = Number(sample);
  if (!/^\d*\.?\d+$/.test(sample) || value > 1) throw new Error(`ACCESS_LOG_SAMPLE must be a number from 0 to 1, got "${sample}"`);
  return { enabled: enabled === 'on', sample: value };
}

/** A switch that is on unless set to "false". */
function flag(env: NodeJS.ProcessEnv, name: string): boolean {
  const raw = env[name] || 'true';
  if (raw !== 'true' && raw !== 'false') throw new Error(`${name} must be "true" or "false", got "${raw}"`);
  return raw === 'true';
}

const MAX_RATE_LIMIT_REDIS_TIMEOUT_MS = 10_000;

/** PROXY_CACHE_SIZE bounds: below 1 MiB an entry of the default max_entry_size would not fit; past 64 GiB it is a typo. */
const MIN_PROXY_CACHE_BYTES = 1024 ** 2;
const MAX_PROXY_CACHE_BYTES = 64 * 1024 ** 3;

function proxyCacheBytes(env: NodeJS.ProcessEnv): number {
  const raw = env.PROXY_CACHE_SIZE || '64MB';
  const bytes = parseSize(raw);
  if (bytes === null || bytes < MIN_PROXY_CACHE_BYTES || bytes > MAX_PROXY_CACHE_BYTES) {
    throw new Error(`PROXY_CACHE_SIZE must be a size from "1MB" to "64GB" such as "64MB" or "1G", got "${raw}"`);
  }
  return bytes;
}

/** The settings naming the proxy listener's certificate and key (in errors and reload warnings). */
export const PROXY_TLS_NAMES = { cert: 'PROXY_TLS_CERT', key: 'PROXY_TLS_KEY', ca: 'PROXY_TLS_CLIENT_CA' } as const;

/** PROXY_TLS_CERT / _KEY, and PROXY_TLS_CLIENT_CA, which only a TLS listener can ask for. */
function proxyTls(env: NodeJS.ProcessEnv): CertificatePaths | null {
  const pair = certificatePairFromEnv(env, PROXY_TLS_NAMES);
  const ca = env.PROXY_TLS_CLIENT_CA || undefined;
  if (ca && !pair) throw new Error('PROXY_TLS_CLIENT_CA asks clients for certificates over TLS: it needs PROXY_TLS_CERT and PROXY_TLS_KEY');
  return pair && ca ? { ...pair, ca } : pair;
}

function tlsMinVersion(env: NodeJS.ProcessEnv): DataPlaneConfig['proxyTlsMinVersion'] {
  const raw = env.PROXY_TLS_MIN_VERSION || 'TLSv1.2';
  if (raw !== 'TLSv1.2' && raw !== 'TLSv1.3') throw new Error(`PROXY_TLS_MIN_VERSION must be "TLSv1.2" or "TLSv1.3", got "${raw}"`);
  return raw;
}

/** A bound against typos (`WORKERS=800`): every worker holds its own routing table and control-plane stream. */
const MAX_WORKERS = 64;

function workers(env: NodeJS.ProcessEnv, cores: number): number {
  const raw = env.WORKERS || '1';
  const value = raw === 'auto' ? Math.min(cores, MAX_WORKERS) : Number(raw);
  if (raw !== 'auto' && (!/^\d+$/.test(raw) || value < 1 || value > MAX_WORKERS)) {
    throw new Error(`WORKERS must be "auto" or a whole number from 1 to ${MAX_WORKERS}, got "${raw}"`);
  }
  return value;
}

/** IDLE_TRIM_AFTER in ms; "0" (or "0s"…) turns the trim off, which parseDuration, taking positive durations only, would refuse. */
function idleTrim(env: NodeJS.ProcessEnv): number {
  if (/^0(?:ms|s|m|h)?$/.test(env.IDLE_TRIM_AFTER ?? '')) return 0;
  return duration(env, 'IDLE_TRIM_AFTER', '10s');
}

/** Throws with a message naming the variable when a value is malformed. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, cores = availableParallelism()): DataPlaneConfig {
  const config: DataPlaneConfig = {
    proxyHost: env.PROXY_HOST || undefined,
    proxyPort: port(env, 'PROXY_PORT', 8080),
    statusHost: env.STATUS_HOST || undefined,
    statusPort: port(env, 'STATUS_PORT', 8083),
    controlPlaneAddr: env.CONTROL_PLANE_ADDR || '127.0.0.1:8082',
    redisUrl: env.REDIS_URL || undefined,
    rateLimitRedisTimeoutMs: duration(env, 'RATE_LIMIT_REDIS_TIMEOUT', '250ms'),
    logLevel: logLevelOf(env),
    dataplaneId: env.DATAPLANE_ID || `${hostname()}-${process.pid}`,
    reconnectBackoffBaseMs: duration(env, 'RECONNECT_BACKOFF_BASE', '500ms'),
    reconnectBackoffMaxMs: duration(env, 'RECONNECT_BACKOFF_MAX', '30s'),
    shutdownTimeoutMs: duration(env, 'SHUTDOWN_TIMEOUT', '10s'),
    // Unset or zero ("0s"): none, the drain starts at SIGTERM.
    shutdownDelayMs: /^(0+(\.0*)?(ms|s|m|h)?)?$/.test(env.SHUTDOWN_DELAY ?? '') ? 0 : duration(env, 'SHUTDOWN_DELAY', '0s'),
    idleTrimMs: idleTrim(env),
    snapshotCache: env.SNAPSHOT_CACHE || undefined,
    grpcTlsServerName: env.GRPC_TLS_SERVER_NAME || undefined,
    grpcTls: grpcTls(env),
    grpcJoinToken: env.GRPC_JOIN_TOKEN || undefined,
    grpcInsecure: env.GRPC_INSECURE === 'true',
    accessLog: accessLog(env),
    workers: workers(env, cores),
    proxyTls: proxyTls(env),
    proxyTlsMinVersion: tlsMinVersion(env),
    upstreamTls: upstreamTlsFromEnv(env),
    proxyHttp2: false,
    proxyH2c: false,
    proxyHttpRedirectPort: env.PROXY_HTTP_REDIRECT_PORT ? port(env, 'PROXY_HTTP_REDIRECT_PORT', 0) : null,
    tlsReloadIntervalMs: duration(env, 'TLS_RELOAD_INTERVAL', '1m'),
    proxyCacheBytes: proxyCacheBytes(env),
    trustedProxies: parseTrustedProxies(env.TRUSTED_PROXIES),
  };
  const http2 = flag(env, 'PROXY_HTTP2');
  // Plain text has no ALPN: h2 there is PROXY_H2C's, told apart by the connection's first bytes.
  if (env.PROXY_HTTP2 === 'true' && !config.proxyTls) throw new Error('PROXY_HTTP2 is offered by TLS ALPN: it needs PROXY_TLS_CERT and PROXY_TLS_KEY');
  config.proxyHttp2 = config.proxyTls !== null && http2;
  const h2c = flag(env, 'PROXY_H2C');
  if (env.PROXY_H2C === 'true' && config.proxyTls)
    throw new Error('PROXY_H2C serves HTTP/2 in plain text: with PROXY_TLS_CERT the listener offers h2 by ALPN (PROXY_HTTP2)');
  config.proxyH2c = config.proxyTls === null && h2c;
  if (config.proxyHttpRedirectPort !== null && !config.proxyTls) {
    throw new Error('PROXY_HTTP_REDIRECT_PORT redirects to HTTPS: it needs PROXY_TLS_CERT and PROXY_TLS_KEY');
  }
  logFormatOf(env);
  traceExport(env); // an unknown OTLP protocol fails the start here, named like any other setting
  if (env.GRPC_INSECURE && env.GRPC_INSECURE !== 'true' && env.GRPC_INSECURE !== 'false') {
    throw new Error(`GRPC_INSECURE must be "true" or "false", got "${env.GRPC_INSECURE}"`);
  }
  if (config.grpcTlsServerName && !config.grpcTls) throw new Error('GRPC_TLS_SERVER_NAME needs GRPC_TLS_CA');
  if (config.grpcJoinToken && !config.grpcTls && !config.grpcInsecure && !isLoopbackHost(hostOfAddress(config.controlPlaneAddr))) {
    throw new Error(
      `GRPC_JOIN_TOKEN would travel in plaintext to CONTROL_PLANE_ADDR ${config.controlPlaneAddr}: set GRPC_TLS_CA (the CA of the control plane certificate), or GRPC_INSECURE=true`,
    );
  }
  if (config.grpcTlsServerName !== undefined && !/^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$/.test(config.grpcTlsServerName)) {
    throw new Error(`GRPC_TLS_SERVER_NAME must be a DNS name, got "${config.grpcTlsServerName}"`);
  }
  // Every request of a `policy: redis` route may wait this long: past 10 s it is a typo, not a choice.
  if (config.rateLimitRedisTimeoutMs > MAX_RATE_LIMIT_REDIS_TIMEOUT_MS) {
    throw new Error(`RATE_LIMIT_REDIS_TIMEOUT must be at most ${MAX_RATE_LIMIT_REDIS_TIMEOUT_MS / 1000}s, got "${env.RATE_LIMIT_REDIS_TIMEOUT}"`);
  }
  if (config.reconnectBackoffBaseMs <= 0) throw new Error('RECONNECT_BACKOFF_BASE must be greater than 0');
  if (config.reconnectBackoffMaxMs < config.reconnectBackoffBaseMs) {
    throw new Error('RECONNECT_BACKOFF_MAX must not be smaller than RECONNECT_BACKOFF_BASE');
  }
  return config;
}
