/**
 * Control-plane configuration from environment variables (docs/configuration.md "Configuration" + process contract).
 * Read once by main.ts; everything else receives the resulting object.
 */
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { importHashKey, MIN_HASH_KEY_BYTES } from '#proto/api-key';
import { tryParseDuration } from '#proto/duration';
import { GatehouseError } from '#proto/errors';
import { isLoopbackHost, serverTlsFromEnv, type ServerTlsFiles } from '#proto/grpc';
import { logFormatOf, logLevelOf } from '#proto/logger';
import { traceExport } from '#proto/tracing';

export interface ControlPlaneConfig {
  adminHost: string;
  adminPort: number;
  grpcHost: string;
  grpcPort: number;
  store: 'file' | 'kubernetes';
  /** STORE=kubernetes only. */
  kubernetes: KubernetesConfig | null;
  dataDir: string;
  /** CONFIG_HISTORY: how many versions of the whole configuration are kept for rollback. */
  configHistory: number;
  adminUser: string;
  /** Unset: generated once into `adminPasswordFile`. */
  adminPassword: string | undefined;
  adminPasswordFile: string;
  /** Unset: generated once into `adminJwtSecretFile`. */
  adminJwtSecret: string | undefined;
  adminJwtSecretFile: string;
  adminTokenTtlSeconds: number;
  /** ADMIN_VIEWER_USER / ADMIN_VIEWER_PASSWORD: a read-only account; null = none. */
  adminViewer: { user: string; password: string } | null;
  /** ADMIN_TLS_CERT / ADMIN_TLS_KEY: HTTPS on the admin listener; null = plain HTTP. */
  adminTls: { cert: string; key: string } | null;
  loginThrottle: LoginThrottleConfig;
  logLevel: string;
  shutdownTimeoutMs: number;
  /** GRPC_TLS_CERT/KEY (+ GRPC_TLS_CA = client certificates required). */
  grpcTls: ServerTlsFiles | null;
  /**
   * GRPC_JOIN_TOKEN (comma-separated: several during a rotation). Empty with neither GRPC_TLS_CA nor
   * GRPC_INSECURE: one is generated once into `grpcJoinTokenFile` (see `generatesJoinToken`).
   */
  grpcJoinTokens: string[];
  grpcJoinTokenFile: string;
  /**
   * GRPC_INSECURE=true: plaintext gRPC allowed on a non-loopback GRPC_HOST, and data planes may
   * connect with no credential when neither GRPC_JOIN_TOKEN nor GRPC_TLS_CA is set.
   */
  grpcInsecure: boolean;
  /** ALLOW_SHORT_HMAC_KEYS=true: admin writes accept HS keys shorter than 32 bytes (a migration; warned at every start). */
  allowShortHmacKeys: boolean;
  /** TLS_RELOAD_INTERVAL: how often certificate files are re-read (SIGHUP re-reads at once). */
  tlsReloadIntervalMs: number;
  /** KEY_AUTH_HASH_KEY: the installation key of key_auth hashes (proto/src/api-key.ts). Unset: generated once into `keyAuthHashKeyFile`. */
  keyAuthHashKey: string | undefined;
  keyAuthHashKeyFile: string;
}

export interface LoginThrottleConfig {
  /** ADMIN_LOGIN_FREE_FAILURES: failed logins per client address / user name answered 401 before backoff starts. */
  freeFailures: number;
  /** ADMIN_LOGIN_BACKOFF_BASE / _MAX: the first wait, doubled on every further failure up to the max. */
  baseDelayMs: number;
  maxDelayMs: number;
  /** ADMIN_LOGIN_USER_BURST: failed logins per user name (from any address) before ADMIN_LOGIN_USER_REFILL applies. */
  userBurst: number;
  /** ADMIN_LOGIN_USER_REFILL: past its burst, a user name gets one more failed login per this interval. */
  userRefillMs: number;
}

export interface KubernetesConfig {
  /** GATEHOUSE_NAMESPACE; unset = the pod's namespace (service-account mount), else `default`. */
  namespace: string | undefined;
  /** LEADER_ELECTION (default true): false = this replica writes status on its own. */
  leaderElection: boolean;
  leaseName: string;
  leaseDurationMs: number;
  /** POD_NAME, else hostname-pid: the Lease holder identity. */
  identity: string;
  /** DISCOVERY_NAMESPACES: namespaces besides its own where a `k8s://` target may name a Service. */
  discoveryNamespaces: string[];
  /** GATEWAY_API=true: the controllerName (GATEWAY_CONTROLLER_NAME) of the GatewayClasses whose routes are served, and the data planes' Service (GATEWAY_ADDRESS_SERVICE) whose addresses Gateways get; null = off. */
  gatewayApi: { controllerName: string; addressService: string | null } | null;
  /** KUBE_API_QPS / KUBE_API_BURST: the client-side limit on the store's apiserver requests (status writes, admin writes, lists). */
  apiRateLimit: { qps: number; burst: number };
}

/**
 * Enough for every CR's first status at 10,000 CRs within seconds; client-go's own defaults (5 / 10)
 * would take over half an hour. The apiserver's priority and fairness still bounds what it serves.
 */
const KUBE_API_QPS = 500;
const KUBE_API_BURST = 1000;

function invalid(name: string, message: string): GatehouseError {
  return new GatehouseError('VALIDATION_FAILED', `${name} ${message}`, { field: name });
}

function port(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value > 65535) throw invalid(name, 'must be a port number (0-65535)');
  return value;
}

function positiveInteger(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value < 1) throw invalid(name, 'must be a positive integer');
  return value;
}

function duration(env: NodeJS.ProcessEnv, name: string, fallback: string): number {
  const raw = env[name] || fallback;
  const ms = tryParseDuration(raw);
  if (ms === null) throw invalid(name, `must be a duration such as "10s" or "250ms" (at most 1h), got "${raw}"`);
  return ms;
}

function bool(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw !== 'true' && raw !== 'false') throw invalid(name, `must be "true" or "false", got "${raw}"`);
  return raw === 'true';
}

/** Two variables that only make sense together: both set, or neither. */
function pair(env: NodeJS.ProcessEnv, first: string, second: string): [string, string] | null {
  const a = nonEmpty(env, first);
  const b = nonEmpty(env, second);
  if (!a !== !b) throw invalid(first, `and ${second} must be set together`);
  return a && b ? [a, b] : null;
}

const MIN_JOIN_TOKEN_CHARS = 16;

/**
 * The snapshot stream carries every upstream address and JWT secret: plaintext only on loopback
 * (the default bind without TLS) unless GRPC_INSECURE=true; TLS without client certificates only
 * with a join token.
 */
function grpcSecurity(env: NodeJS.ProcessEnv) {
  const grpcInsecure = bool(env, 'GRPC_INSECURE', false);
  let grpcTls: ServerTlsFiles | null;
  try {
    grpcTls = serverTlsFromEnv(env);
  } catch (err) {
    throw invalid('GRPC_TLS_CERT', `is incomplete: ${(err as Error).message}`);
  }
  const grpcHost = env.GRPC_HOST || (grpcTls ? '0.0.0.0' : '127.0.0.1');
  const grpcJoinTokens = (env.GRPC_JOIN_TOKEN ?? '')
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  if (grpcJoinTokens.some((t) => t.length < MIN_JOIN_TOKEN_CHARS)) {
    throw invalid('GRPC_JOIN_TOKEN', `must hold tokens of at least ${MIN_JOIN_TOKEN_CHARS} characters (use e.g. openssl rand -hex 32)`);
  }
  if (!grpcTls && !grpcInsecure && !isLoopbackHost(grpcHost)) {
    throw invalid(
      'GRPC_HOST',
      `${grpcHost} is not a loopback address and gRPC has no TLS: every data plane's snapshot (upstreams, JWT secrets) would travel in plaintext. ` +
        'Set GRPC_TLS_CERT and GRPC_TLS_KEY (with GRPC_TLS_CA for mutual TLS, or GRPC_JOIN_TOKEN), or GRPC_INSECURE=true to allow plaintext',
    );
  }
  if (grpcTls && !grpcTls.ca && grpcJoinTokens.length === 0 && !grpcInsecure) {
    throw invalid(
      'GRPC_TLS_CA',
      'or GRPC_JOIN_TOKEN is required with GRPC_TLS_CERT: otherwise any client could subscribe to the snapshots (or set GRPC_INSECURE=true)',
    );
  }
  return { grpcHost, grpcTls, grpcJoinTokens, grpcInsecure };
}

/**
 * Plaintext on loopback with no credential named: any local process could read every secret of the
 * snapshots, so the control plane makes a join token of its own (GRPC_INSECURE=true opts out).
 */
export function generatesJoinToken(config: Pick<ControlPlaneConfig, 'grpcTls' | 'grpcJoinTokens' | 'grpcInsecure'>): boolean {
  return config.grpcJoinTokens.length === 0 && !config.grpcTls?.ca && !config.grpcInsecure;
}

/** KEY_AUTH_HASH_KEY, when set: its text is the key, at least MIN_HASH_KEY_BYTES bytes of it. */
function keyAuthHashKey(env: NodeJS.ProcessEnv): string | undefined {
  const key = nonEmpty(env, 'KEY_AUTH_HASH_KEY');
  if (key !== undefined) {
    try {
      importHashKey(key);
    } catch {
      throw invalid('KEY_AUTH_HASH_KEY', `must be ${MIN_HASH_KEY_BYTES} to 1024 bytes (use e.g. openssl rand -hex 32)`);
    }
  }
  return key;
}

function nonEmpty(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value === '' ? undefined : value;
}

function discoveryNamespaces(env: NodeJS.ProcessEnv): string[] {
  const names = (env.DISCOVERY_NAMESPACES ?? '')
    .split(',')
    .map((n) => n.trim())
    .filter(Boolean);
  const bad = names.find((n) => !/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(n));
  if (bad !== undefined) throw invalid('DISCOVERY_NAMESPACES', `holds "${bad}", which is not a namespace name`);
  return names;
}

/** Gateway API's controllerName form: a domain-prefixed path. */
const CONTROLLER_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9\/\-._~%!$&'()*+,;=:]+$/;

function gatewayApi(env: NodeJS.ProcessEnv): KubernetesConfig['gatewayApi'] {
  const on = env.GATEWAY_API || 'false';
  if (on !== 'true' && on !== 'false') throw invalid('GATEWAY_API', 'must be "true" or "false"');
  const controllerName = env.GATEWAY_CONTROLLER_NAME || 'gatehouse.dev/gateway-controller';
  if (controllerName.length > 253 || !CONTROLLER_NAME.test(controllerName))
    throw invalid('GATEWAY_CONTROLLER_NAME', `must be a domain-prefixed path (e.g. gatehouse.dev/gateway-controller), got "${controllerName}"`);
  const addressService = env.GATEWAY_ADDRESS_SERVICE || null;
  if (addressService !== null && !/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/.test(addressService))
    throw invalid('GATEWAY_ADDRESS_SERVICE', `must be a Service name, got "${addressService}"`);
  return on === 'true' ? { controllerName, addressService } : null;
}

export function loadConfig(env: NodeJS.ProcessEnv): ControlPlaneConfig {
  const store = env.STORE || 'file';
  if (store !== 'file' && store !== 'kubernetes') throw invalid('STORE', `must be "file" or "kubernetes", got "${store}"`);
  const leaderElection = env.LEADER_ELECTION || 'true';
  if (leaderElection !== 'true' && leaderElection !== 'false') throw invalid('LEADER_ELECTION', 'must be "true" or "false"');
  if (store !== 'kubernetes' && env.GATEWAY_API === 'true')
    throw invalid('GATEWAY_API', 'needs STORE=kubernetes (Gateway API objects are read from the cluster)');
  const kubernetes: KubernetesConfig | null =
    store === 'kubernetes'
      ? {
          namespace: nonEmpty(env, 'GATEHOUSE_NAMESPACE'),
          leaderElection: leaderElection === 'true',
          leaseName: env.LEASE_NAME || 'gatehouse-control-plane',
          leaseDurationMs: duration(env, 'LEASE_DURATION', '15s'),
          identity: env.POD_NAME || `${hostname()}-${process.pid}`,
          discoveryNamespaces: discoveryNamespaces(env),
          gatewayApi: gatewayApi(env),
          apiRateLimit: { qps: positiveInteger(env, 'KUBE_API_QPS', KUBE_API_QPS), burst: positiveInteger(env, 'KUBE_API_BURST', KUBE_API_BURST) },
        }
      : null;

  const logLevel = logLevelOf(env);
  logFormatOf(env);
  traceExport(env); // an unknown OTLP protocol fails the start here, named like any other setting

  const adminUser = env.ADMIN_USER || 'admin';
  const dataDir = resolve(env.DATA_DIR || './data');

  const viewer = pair(env, 'ADMIN_VIEWER_USER', 'ADMIN_VIEWER_PASSWORD');
  if (viewer && viewer[0] === adminUser) throw invalid('ADMIN_VIEWER_USER', 'must differ from ADMIN_USER');
  const adminTls = pair(env, 'ADMIN_TLS_CERT', 'ADMIN_TLS_KEY');
  const loginThrottle: LoginThrottleConfig = {
    freeFailures: positiveInteger(env, 'ADMIN_LOGIN_FREE_FAILURES', 5),
    baseDelayMs: duration(env, 'ADMIN_LOGIN_BACKOFF_BASE', '1s'),
    maxDelayMs: duration(env, 'ADMIN_LOGIN_BACKOFF_MAX', '15m'),
    userBurst: positiveInteger(env, 'ADMIN_LOGIN_USER_BURST', 20),
    userRefillMs: duration(env, 'ADMIN_LOGIN_USER_REFILL', '1m'),
  };
  if (loginThrottle.maxDelayMs < loginThrottle.baseDelayMs) throw invalid('ADMIN_LOGIN_BACKOFF_MAX', 'must not be smaller than ADMIN_LOGIN_BACKOFF_BASE');

  return {
    adminHost: env.ADMIN_HOST || '0.0.0.0',
    adminPort: port(env, 'ADMIN_PORT', 8081),
    grpcPort: port(env, 'GRPC_PORT', 8082),
    store,
    kubernetes,
    dataDir,
    configHistory: positiveInteger(env, 'CONFIG_HISTORY', 20),
    adminUser,
    adminPassword: nonEmpty(env, 'ADMIN_PASSWORD'),
    adminPasswordFile: join(dataDir, 'admin-password'),
    adminJwtSecret: nonEmpty(env, 'ADMIN_JWT_SECRET'),
    adminJwtSecretFile: join(dataDir, 'admin-jwt-secret'),
    adminTokenTtlSeconds: positiveInteger(env, 'ADMIN_TOKEN_TTL', 3600),
    adminViewer: viewer && { user: viewer[0], password: viewer[1] },
    adminTls: adminTls && { cert: adminTls[0], key: adminTls[1] },
    loginThrottle,
    logLevel,
    shutdownTimeoutMs: duration(env, 'SHUTDOWN_TIMEOUT', '10s'),
    ...grpcSecurity(env),
    grpcJoinTokenFile: join(dataDir, 'grpc-join-token'),
    allowShortHmacKeys: bool(env, 'ALLOW_SHORT_HMAC_KEYS', false),
    tlsReloadIntervalMs: duration(env, 'TLS_RELOAD_INTERVAL', '1m'),
    keyAuthHashKey: keyAuthHashKey(env),
    keyAuthHashKeyFile: join(dataDir, 'key-auth-hash-key'),
  };
}
