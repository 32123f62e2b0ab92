/**
 * Control-plane configuration from environment variables (docs/configuration.md "Configuration" + process contract).
 * Read once by main.ts; everything else receives the resulting object.
 */
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { importHashKey, MIN_HASH_KEY_BYTES } from '#proto/api-key';
import { z } from 'zod';
import { boolean, bothOrNeither, duration, type EnvChecks, integer, list, oneOf, parseEnv, port, text, variable } from '#proto/env';
import { isLoopbackHost, serverTlsFromEnv, type ServerTlsFiles } from '#proto/grpc';
import { LOG_FORMAT, LOG_LEVEL } from '#proto/logger';
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

const MIN_JOIN_TOKEN_CHARS = 16;

/** Gateway API's controllerName form: a domain-prefixed path. */
const CONTROLLER_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$/;

const MAX = Number.MAX_SAFE_INTEGER;

/** The control plane's variables, each alone; loadConfig relates them. */
const CONTROL_PLANE_ENV = z.object({
  ADMIN_HOST: text('0.0.0.0'),
  ADMIN_PORT: port(8081),
  GRPC_HOST: text(),
  GRPC_PORT: port(8082),
  STORE: oneOf(['file', 'kubernetes'], 'file'),
  LEADER_ELECTION: boolean(true),
  DATA_DIR: text('./data'),
  CONFIG_HISTORY: integer(1, MAX, 20),
  ADMIN_USER: text('admin'),
  ADMIN_PASSWORD: text(),
  ADMIN_JWT_SECRET: text(),
  ADMIN_TOKEN_TTL: integer(1, MAX, 3600),
  ADMIN_LOGIN_FREE_FAILURES: integer(1, MAX, 5),
  ADMIN_LOGIN_BACKOFF_BASE: duration('1s'),
  ADMIN_LOGIN_BACKOFF_MAX: duration('15m'),
  ADMIN_LOGIN_USER_BURST: integer(1, MAX, 20),
  ADMIN_LOGIN_USER_REFILL: duration('1m'),
  LOG_LEVEL,
  LOG_FORMAT,
  SHUTDOWN_TIMEOUT: duration('10s'),
  // Tokens are secrets: a short one is refused by loadConfig without being echoed.
  GRPC_JOIN_TOKEN: list('tokens'),
  GRPC_INSECURE: boolean(false),
  ALLOW_SHORT_HMAC_KEYS: boolean(false),
  TLS_RELOAD_INTERVAL: duration('1m'),
  KEY_AUTH_HASH_KEY: text(),
});

/** Read only with STORE=kubernetes. */
const KUBERNETES_ENV = z.object({
  GATEHOUSE_NAMESPACE: text(),
  LEASE_NAME: text('gatehouse-control-plane'),
  LEASE_DURATION: duration('15s'),
  POD_NAME: text(),
  DISCOVERY_NAMESPACES: list('namespace names', (n) => /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(n)),
  GATEWAY_API: boolean(false),
  GATEWAY_CONTROLLER_NAME: variable(
    'a domain-prefixed path (e.g. gatehouse.dev/gateway-controller)',
    (s) => (s.length <= 253 && CONTROLLER_NAME.test(s) ? s : null),
    'gatehouse.dev/gateway-controller',
  ),
  GATEWAY_ADDRESS_SERVICE: variable('a Service name', (s) => (/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/.test(s) ? s : null), null),
  KUBE_API_QPS: integer(1, MAX, KUBE_API_QPS),
  KUBE_API_BURST: integer(1, MAX, KUBE_API_BURST),
});

function kubernetesConfig(env: NodeJS.ProcessEnv, leaderElection: boolean, checks: EnvChecks): KubernetesConfig | null {
  const vars = checks.parse(env, KUBERNETES_ENV);
  if (!vars) return null;
  return {
    namespace: vars.GATEHOUSE_NAMESPACE,
    leaderElection,
    leaseName: vars.LEASE_NAME,
    leaseDurationMs: vars.LEASE_DURATION,
    identity: vars.POD_NAME ?? `${hostname()}-${process.pid}`,
    discoveryNamespaces: vars.DISCOVERY_NAMESPACES,
    gatewayApi: vars.GATEWAY_API ? { controllerName: vars.GATEWAY_CONTROLLER_NAME, addressService: vars.GATEWAY_ADDRESS_SERVICE } : null,
    apiRateLimit: { qps: vars.KUBE_API_QPS, burst: vars.KUBE_API_BURST },
  };
}

/**
 * The snapshot stream carries every upstream address and JWT secret: plaintext only on loopback
 * (the default bind without TLS) unless GRPC_INSECURE=true; TLS without client certificates only
 * with a join token.
 */
function grpcSecurity(env: NodeJS.ProcessEnv, vars: { GRPC_HOST?: string; GRPC_JOIN_TOKEN: string[]; GRPC_INSECURE: boolean }, checks: EnvChecks) {
  const grpcInsecure = vars.GRPC_INSECURE;
  const grpcTls = checks.attempt(() => serverTlsFromEnv(env)) ?? null;
  const grpcHost = vars.GRPC_HOST ?? (grpcTls ? '0.0.0.0' : '127.0.0.1');
  const grpcJoinTokens = vars.GRPC_JOIN_TOKEN;
  if (grpcJoinTokens.some((t) => t.length < MIN_JOIN_TOKEN_CHARS)) {
    checks.fail('GRPC_JOIN_TOKEN', `must hold tokens of at least ${MIN_JOIN_TOKEN_CHARS} characters (use e.g. openssl rand -hex 32)`);
  }
  if (!grpcTls && !grpcInsecure && !isLoopbackHost(grpcHost)) {
    checks.fail(
      'GRPC_HOST',
      `${grpcHost} is not a loopback address and gRPC has no TLS: every data plane's snapshot (upstreams, JWT secrets) would travel in plaintext. ` +
        'Set GRPC_TLS_CERT and GRPC_TLS_KEY (with GRPC_TLS_CA for mutual TLS, or GRPC_JOIN_TOKEN), or GRPC_INSECURE=true to allow plaintext',
    );
  }
  if (grpcTls && !grpcTls.ca && grpcJoinTokens.length === 0 && !grpcInsecure) {
    checks.fail('GRPC_TLS_CERT', 'needs GRPC_TLS_CA or GRPC_JOIN_TOKEN: otherwise any client could subscribe to the snapshots (or set GRPC_INSECURE=true)');
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

function importsAsHashKey(key: string): boolean {
  try {
    importHashKey(key);
    return true;
  } catch {
    return false;
  }
}

/** Throws a ConfigError naming every malformed variable. */
export function loadConfig(env: NodeJS.ProcessEnv): ControlPlaneConfig {
  return parseEnv(env, CONTROL_PLANE_ENV, (vars, checks) => {
    if (vars.STORE !== 'kubernetes' && env.GATEWAY_API === 'true') {
      checks.fail('GATEWAY_API', 'needs STORE=kubernetes (Gateway API objects are read from the cluster)');
    }
    const kubernetes = vars.STORE === 'kubernetes' ? kubernetesConfig(env, vars.LEADER_ELECTION, checks) : null;
    checks.attempt(() => traceExport(env)); // an unknown OTLP protocol fails the start here, named like any other setting

    const adminUser = vars.ADMIN_USER;
    const dataDir = resolve(vars.DATA_DIR);
    const viewer = checks.attempt(() => bothOrNeither(env, 'ADMIN_VIEWER_USER', 'ADMIN_VIEWER_PASSWORD')) ?? null;
    if (viewer && viewer[0] === adminUser) checks.fail('ADMIN_VIEWER_USER', 'must differ from ADMIN_USER');
    const adminTls = checks.attempt(() => bothOrNeither(env, 'ADMIN_TLS_CERT', 'ADMIN_TLS_KEY')) ?? null;
    const loginThrottle: LoginThrottleConfig = {
      freeFailures: vars.ADMIN_LOGIN_FREE_FAILURES,
      baseDelayMs: vars.ADMIN_LOGIN_BACKOFF_BASE,
      maxDelayMs: vars.ADMIN_LOGIN_BACKOFF_MAX,
      userBurst: vars.ADMIN_LOGIN_USER_BURST,
      userRefillMs: vars.ADMIN_LOGIN_USER_REFILL,
    };
    if (loginThrottle.maxDelayMs < loginThrottle.baseDelayMs) checks.fail('ADMIN_LOGIN_BACKOFF_MAX', 'must not be smaller than ADMIN_LOGIN_BACKOFF_BASE');
    const keyAuthHashKey = vars.KEY_AUTH_HASH_KEY;
    // The key is a secret: named, never echoed.
    if (keyAuthHashKey !== undefined && !importsAsHashKey(keyAuthHashKey)) {
      checks.fail('KEY_AUTH_HASH_KEY', `must be ${MIN_HASH_KEY_BYTES} to 1024 bytes (use e.g. openssl rand -hex 32)`);
    }

    return {
      adminHost: vars.ADMIN_HOST,
      adminPort: vars.ADMIN_PORT,
      grpcPort: vars.GRPC_PORT,
      store: vars.STORE,
      kubernetes,
      dataDir,
      configHistory: vars.CONFIG_HISTORY,
      adminUser,
      adminPassword: vars.ADMIN_PASSWORD,
      adminPasswordFile: join(dataDir, 'admin-password'),
      adminJwtSecret: vars.ADMIN_JWT_SECRET,
      adminJwtSecretFile: join(dataDir, 'admin-jwt-secret'),
      adminTokenTtlSeconds: vars.ADMIN_TOKEN_TTL,
      adminViewer: viewer && { user: viewer[0], password: viewer[1] },
      adminTls: adminTls && { cert: adminTls[0], key: adminTls[1] },
      loginThrottle,
      logLevel: vars.LOG_LEVEL,
      shutdownTimeoutMs: vars.SHUTDOWN_TIMEOUT,
      ...grpcSecurity(env, vars, checks),
      grpcJoinTokenFile: join(dataDir, 'grpc-join-token'),
      allowShortHmacKeys: vars.ALLOW_SHORT_HMAC_KEYS,
      tlsReloadIntervalMs: vars.TLS_RELOAD_INTERVAL,
      keyAuthHashKey,
      keyAuthHashKeyFile: join(dataDir, 'key-auth-hash-key'),
    };
  });
}
