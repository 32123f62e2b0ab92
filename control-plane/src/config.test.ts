import { join, resolve } from 'node:path';
import { ConfigError } from '#proto/env';
import { generatesJoinToken, loadConfig } from './config.js';

describe('loadConfig', () => {
  test('defaults per SPEC §1 and the process contract (no data-plane credential allowed explicitly)', () => {
    expect(loadConfig({ GRPC_INSECURE: 'true' })).toEqual({
      adminHost: '0.0.0.0',
      adminPort: 8081,
      grpcHost: '127.0.0.1',
      grpcPort: 8082,
      store: 'file',
      kubernetes: null,
      dataDir: resolve('./data'),
      configHistory: 20,
      adminUser: 'admin',
      adminPassword: undefined,
      adminPasswordFile: join(resolve('./data'), 'admin-password'),
      adminJwtSecret: undefined,
      adminJwtSecretFile: join(resolve('./data'), 'admin-jwt-secret'),
      adminTokenTtlSeconds: 3600,
      adminViewer: null,
      adminTls: null,
      loginThrottle: { freeFailures: 5, baseDelayMs: 1000, maxDelayMs: 900_000, userBurst: 20, userRefillMs: 60_000 },
      logLevel: 'info',
      shutdownTimeoutMs: 10_000,
      grpcTls: null,
      grpcJoinTokens: [],
      grpcJoinTokenFile: join(resolve('./data'), 'grpc-join-token'),
      grpcInsecure: true,
      allowShortHmacKeys: false,
      tlsReloadIntervalMs: 60_000,
      keyAuthHashKey: undefined,
      keyAuthHashKeyFile: join(resolve('./data'), 'key-auth-hash-key'),
    });
  });

  test('plaintext gRPC on a non-loopback GRPC_HOST is refused, naming GRPC_INSECURE', () => {
    expect(() => loadConfig({ GRPC_HOST: '0.0.0.0' })).toThrow(/^GRPC_HOST: 0\.0\.0\.0 is not a loopback address.*GRPC_INSECURE=true/);
  });

  test('no environment at all: gRPC binds loopback and the control plane generates a join token', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({ grpcHost: '127.0.0.1', grpcTls: null, grpcJoinTokens: [], grpcInsecure: false });
    expect(generatesJoinToken(config)).toBe(true);
  });

  test.each<[string, NodeJS.ProcessEnv, boolean]>([
    ['a join token given', { GRPC_JOIN_TOKEN: 'a'.repeat(16) }, false],
    ['GRPC_INSECURE=true (no credential, explicitly)', { GRPC_INSECURE: 'true' }, false],
    ['mutual TLS', { GRPC_TLS_CERT: 'c', GRPC_TLS_KEY: 'k', GRPC_TLS_CA: 'a' }, false],
    ['plaintext on loopback, nothing else', { GRPC_HOST: '::1' }, true],
  ])('generates a join token: %s → %s', (_name, env, generates) => {
    expect(generatesJoinToken(loadConfig(env))).toBe(generates);
  });

  test.each<[string, NodeJS.ProcessEnv, Record<string, unknown>]>([
    ['ephemeral ports', { ADMIN_PORT: '0', GRPC_PORT: '0' }, { adminPort: 0, grpcPort: 0 }],
    ['bind addresses', { ADMIN_HOST: '127.0.0.1', GRPC_HOST: '::1' }, { adminHost: '127.0.0.1', grpcHost: '::1' }],
    ['credentials', { ADMIN_USER: 'ops', ADMIN_PASSWORD: 'pw', ADMIN_JWT_SECRET: 's' }, { adminUser: 'ops', adminPassword: 'pw', adminJwtSecret: 's' }],
    ['empty password means generated', { ADMIN_PASSWORD: '' }, { adminPassword: undefined }],
    ['token ttl', { ADMIN_TOKEN_TTL: '1' }, { adminTokenTtlSeconds: 1 }],
    ['config history', { CONFIG_HISTORY: '5' }, { configHistory: 5 }],
    ['shutdown timeout', { SHUTDOWN_TIMEOUT: '250ms' }, { shutdownTimeoutMs: 250 }],
    ['data dir', { DATA_DIR: '/var/lib/gatehouse' }, { dataDir: '/var/lib/gatehouse', adminPasswordFile: '/var/lib/gatehouse/admin-password' }],
    [
      'kubernetes store defaults',
      { STORE: 'kubernetes', POD_NAME: 'cp-0' },
      {
        store: 'kubernetes',
        kubernetes: {
          namespace: undefined,
          leaderElection: true,
          leaseName: 'gatehouse-control-plane',
          leaseDurationMs: 15_000,
          identity: 'cp-0',
          discoveryNamespaces: [],
          gatewayApi: null,
          apiRateLimit: { qps: 500, burst: 1000 },
        },
      },
    ],
    [
      'kubernetes store settings',
      {
        STORE: 'kubernetes',
        GATEHOUSE_NAMESPACE: 'gw',
        LEADER_ELECTION: 'false',
        LEASE_NAME: 'l',
        LEASE_DURATION: '3s',
        DISCOVERY_NAMESPACES: 'shop, billing',
        KUBE_API_QPS: '50',
        KUBE_API_BURST: '100',
      },
      {
        kubernetes: {
          namespace: 'gw',
          leaderElection: false,
          leaseName: 'l',
          leaseDurationMs: 3000,
          discoveryNamespaces: ['shop', 'billing'],
          apiRateLimit: { qps: 50, burst: 100 },
        },
      },
    ],
    [
      'Gateway API on',
      { STORE: 'kubernetes', GATEWAY_API: 'true' },
      { kubernetes: { gatewayApi: { controllerName: 'gatehouse.dev/gateway-controller', addressService: null } } },
    ],
    [
      'Gateway API controller name',
      { STORE: 'kubernetes', GATEWAY_API: 'true', GATEWAY_CONTROLLER_NAME: 'example.com/gw' },
      { kubernetes: { gatewayApi: { controllerName: 'example.com/gw', addressService: null } } },
    ],
    [
      'Gateway API address Service',
      { STORE: 'kubernetes', GATEWAY_API: 'true', GATEWAY_ADDRESS_SERVICE: 'gatehouse-data-plane' },
      { kubernetes: { gatewayApi: { addressService: 'gatehouse-data-plane' } } },
    ],
    ['mTLS files', { GRPC_TLS_CERT: 'c', GRPC_TLS_KEY: 'k', GRPC_TLS_CA: 'a' }, { grpcTls: { cert: 'c', key: 'k', ca: 'a' } }],
    ['with TLS the default bind is every address', { GRPC_HOST: '', GRPC_TLS_CERT: 'c', GRPC_TLS_KEY: 'k', GRPC_TLS_CA: 'a' }, { grpcHost: '0.0.0.0' }],
    ['plaintext on loopback', { GRPC_HOST: '127.0.0.1' }, { grpcTls: null, grpcInsecure: false }],
    ['plaintext on ::1', { GRPC_HOST: '::1' }, { grpcTls: null }],
    ['plaintext on localhost', { GRPC_HOST: 'localhost' }, { grpcTls: null }],
    [
      'server TLS + join tokens (rotation: two)',
      { GRPC_TLS_CERT: 'c', GRPC_TLS_KEY: 'k', GRPC_JOIN_TOKEN: `${'a'.repeat(16)}, ${'b'.repeat(20)}` },
      { grpcTls: { cert: 'c', key: 'k' }, grpcJoinTokens: ['a'.repeat(16), 'b'.repeat(20)] },
    ],
    ['GRPC_INSECURE=false with loopback', { GRPC_HOST: '127.0.0.1', GRPC_INSECURE: 'false' }, { grpcInsecure: false }],
    ['short HMAC keys allowed', { ALLOW_SHORT_HMAC_KEYS: 'true' }, { allowShortHmacKeys: true }],
    ['key_auth installation key', { KEY_AUTH_HASH_KEY: 'k'.repeat(32) }, { keyAuthHashKey: 'k'.repeat(32) }],
    ['TLS reload interval', { GRPC_HOST: '127.0.0.1', TLS_RELOAD_INTERVAL: '5s' }, { tlsReloadIntervalMs: 5000 }],
    ['viewer account', { GRPC_HOST: '127.0.0.1', ADMIN_VIEWER_USER: 'ro', ADMIN_VIEWER_PASSWORD: 'pw' }, { adminViewer: { user: 'ro', password: 'pw' } }],
    ['admin TLS', { GRPC_HOST: '127.0.0.1', ADMIN_TLS_CERT: 'c', ADMIN_TLS_KEY: 'k' }, { adminTls: { cert: 'c', key: 'k' } }],
    [
      'login throttle',
      {
        GRPC_HOST: '127.0.0.1',
        ADMIN_LOGIN_FREE_FAILURES: '2',
        ADMIN_LOGIN_BACKOFF_BASE: '100ms',
        ADMIN_LOGIN_BACKOFF_MAX: '2s',
        ADMIN_LOGIN_USER_BURST: '7',
        ADMIN_LOGIN_USER_REFILL: '30s',
      },
      { loginThrottle: { freeFailures: 2, baseDelayMs: 100, maxDelayMs: 2000, userBurst: 7, userRefillMs: 30_000 } },
    ],
  ])('%s', (_name, env, expected) => {
    // Loopback unless the row says otherwise: plaintext gRPC elsewhere needs GRPC_INSECURE (tested above).
    expect(loadConfig({ GRPC_HOST: '127.0.0.1', ...env })).toMatchObject(expected);
  });

  test.each<[string, NodeJS.ProcessEnv, string]>([
    ['bad LEADER_ELECTION', { STORE: 'kubernetes', LEADER_ELECTION: 'yes' }, 'LEADER_ELECTION: expected "true" or "false", got "yes"'],
    [
      'bad DISCOVERY_NAMESPACES',
      { STORE: 'kubernetes', DISCOVERY_NAMESPACES: 'shop,Billing' },
      'DISCOVERY_NAMESPACES: expected namespace names, got "Billing"',
    ],
    [
      'bad GATEWAY_ADDRESS_SERVICE',
      { STORE: 'kubernetes', GATEWAY_API: 'true', GATEWAY_ADDRESS_SERVICE: 'Data_Plane' },
      'GATEWAY_ADDRESS_SERVICE: expected a Service name, got "Data_Plane"',
    ],
    ['bad GATEWAY_API', { STORE: 'kubernetes', GATEWAY_API: 'yes' }, 'GATEWAY_API: expected "true" or "false", got "yes"'],
    ['GATEWAY_API without the Kubernetes store', { GATEWAY_API: 'true', GRPC_HOST: '127.0.0.1' }, 'GATEWAY_API: needs STORE=kubernetes'],
    [
      'bad GATEWAY_CONTROLLER_NAME',
      { STORE: 'kubernetes', GATEWAY_API: 'true', GATEWAY_CONTROLLER_NAME: 'no-slash' },
      'GATEWAY_CONTROLLER_NAME: expected a domain-prefixed path',
    ],
    [
      'bad LEASE_DURATION',
      { STORE: 'kubernetes', LEASE_DURATION: 'long' },
      'LEASE_DURATION: expected a duration such as "500ms" or "30s" (at most 1h), got "long"',
    ],
    ['bad KUBE_API_QPS', { STORE: 'kubernetes', KUBE_API_QPS: '0' }, 'KUBE_API_QPS: expected an integer of at least 1, got "0"'],
    ['bad KUBE_API_BURST', { STORE: 'kubernetes', KUBE_API_BURST: 'many' }, 'KUBE_API_BURST: expected an integer of at least 1, got "many"'],
    ['unknown store', { STORE: 'redis' }, 'STORE: expected "file" or "kubernetes", got "redis"'],
    ['port out of range', { ADMIN_PORT: '70000' }, 'ADMIN_PORT: expected a port number 0-65535, got "70000"'],
    ['port not a number', { GRPC_PORT: 'http' }, 'GRPC_PORT: expected a port number 0-65535, got "http"'],
    ['ttl zero', { ADMIN_TOKEN_TTL: '0' }, 'ADMIN_TOKEN_TTL: expected an integer of at least 1, got "0"'],
    ['config history zero', { CONFIG_HISTORY: '0' }, 'CONFIG_HISTORY: expected an integer of at least 1, got "0"'],
    ['bad duration', { SHUTDOWN_TIMEOUT: 'soon' }, 'SHUTDOWN_TIMEOUT: expected a duration'],
    ['bad log level', { LOG_LEVEL: 'loud' }, 'LOG_LEVEL: expected one of fatal, error, warn, info, debug, trace, silent, got "loud"'],
    ['cert without key', { GRPC_TLS_CERT: 'c' }, 'GRPC_TLS_CERT: needs GRPC_TLS_KEY (both or neither)'],
    ['CA without cert', { GRPC_TLS_CA: 'a', GRPC_HOST: '127.0.0.1' }, 'GRPC_TLS_CA: needs GRPC_TLS_CERT and GRPC_TLS_KEY'],
    ['server TLS that authenticates nobody', { GRPC_TLS_CERT: 'c', GRPC_TLS_KEY: 'k' }, 'GRPC_TLS_CERT: needs GRPC_TLS_CA or GRPC_JOIN_TOKEN'],
    ['short join token', { GRPC_HOST: '127.0.0.1', GRPC_JOIN_TOKEN: 'short' }, 'GRPC_JOIN_TOKEN: must hold tokens of at least 16 characters'],
    ['bad ALLOW_SHORT_HMAC_KEYS', { GRPC_HOST: '127.0.0.1', ALLOW_SHORT_HMAC_KEYS: 'yes' }, 'ALLOW_SHORT_HMAC_KEYS: expected "true" or "false", got "yes"'],
    ['bad GRPC_INSECURE', { GRPC_INSECURE: 'yes' }, 'GRPC_INSECURE: expected "true" or "false", got "yes"'],
    ['short KEY_AUTH_HASH_KEY', { KEY_AUTH_HASH_KEY: 'k'.repeat(31) }, 'KEY_AUTH_HASH_KEY: must be 32 to 1024 bytes'],
    ['viewer without password', { GRPC_HOST: '127.0.0.1', ADMIN_VIEWER_USER: 'ro' }, 'ADMIN_VIEWER_USER: needs ADMIN_VIEWER_PASSWORD (both or neither)'],
    [
      'viewer named like the admin',
      { GRPC_HOST: '127.0.0.1', ADMIN_VIEWER_USER: 'admin', ADMIN_VIEWER_PASSWORD: 'pw' },
      'ADMIN_VIEWER_USER: must differ from ADMIN_USER',
    ],
    ['admin key without cert', { GRPC_HOST: '127.0.0.1', ADMIN_TLS_KEY: 'k' }, 'ADMIN_TLS_KEY: needs ADMIN_TLS_CERT (both or neither)'],
    ['bad ADMIN_LOGIN_BACKOFF_BASE', { GRPC_HOST: '127.0.0.1', ADMIN_LOGIN_BACKOFF_BASE: 'soon' }, 'ADMIN_LOGIN_BACKOFF_BASE: expected a duration'],
    [
      'backoff max below base',
      { GRPC_HOST: '127.0.0.1', ADMIN_LOGIN_BACKOFF_BASE: '2s', ADMIN_LOGIN_BACKOFF_MAX: '1s' },
      'ADMIN_LOGIN_BACKOFF_MAX: must not be smaller than ADMIN_LOGIN_BACKOFF_BASE',
    ],
    ['free failures zero', { GRPC_HOST: '127.0.0.1', ADMIN_LOGIN_FREE_FAILURES: '0' }, 'ADMIN_LOGIN_FREE_FAILURES: expected an integer of at least 1, got "0"'],
    ['user burst zero', { GRPC_HOST: '127.0.0.1', ADMIN_LOGIN_USER_BURST: '0' }, 'ADMIN_LOGIN_USER_BURST: expected an integer of at least 1, got "0"'],
    ['user refill zero', { GRPC_HOST: '127.0.0.1', ADMIN_LOGIN_USER_REFILL: '0s' }, 'ADMIN_LOGIN_USER_REFILL: expected a duration'],
    [
      'unknown OTLP protocol',
      { GRPC_HOST: '127.0.0.1', OTEL_EXPORTER_OTLP_PROTOCOL: 'http' },
      'OTEL_EXPORTER_OTLP_PROTOCOL: expected "http/protobuf", "http/json" or "grpc", got "http"',
    ],
  ])('rejects %s', (_name, env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  test('every problem is reported at once, one `NAME: problem` each, without echoing secrets', () => {
    const secret = 'k'.repeat(31);
    let error: unknown;
    try {
      loadConfig({ ADMIN_PORT: 'http', STORE: 'kubernetes', KUBE_API_QPS: '0', KEY_AUTH_HASH_KEY: secret, GRPC_JOIN_TOKEN: 'short-token' });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual([{ name: 'ADMIN_PORT', message: 'expected a port number 0-65535, got "http"' }]);
    try {
      loadConfig({ STORE: 'kubernetes', KUBE_API_QPS: '0', KEY_AUTH_HASH_KEY: secret, GRPC_JOIN_TOKEN: 'short-token' });
    } catch (err) {
      error = err;
    }
    expect((error as ConfigError).problems.map((p) => p.name)).toEqual(['KUBE_API_QPS', 'KEY_AUTH_HASH_KEY', 'GRPC_JOIN_TOKEN']);
    expect((error as ConfigError).message).not.toContain(secret);
    expect((error as ConfigError).message).not.toContain('short-token');
  });

  test('the Kubernetes variables are read with STORE=kubernetes only', () => {
    expect(loadConfig({ GRPC_HOST: '127.0.0.1', KUBE_API_QPS: '0', LEASE_DURATION: 'long' }).kubernetes).toBeNull();
  });
});
