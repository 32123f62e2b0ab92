import { join, resolve } from 'node:path';
import { loadConfig } from './config.js';

describe('loadConfig', () => {
  test('defaults per SPEC §1 and the process contract', () => {
    expect(loadConfig({})).toEqual({
      adminHost: '0.0.0.0',
      adminPort: 8081,
      grpcHost: '0.0.0.0',
      grpcPort: 8082,
      store: 'file',
      kubernetes: null,
      dataDir: resolve('./data'),
      adminUser: 'admin',
      adminPassword: undefined,
      adminPasswordFile: join(resolve('./data'), 'admin-password'),
      adminJwtSecret: undefined,
      adminJwtSecretFile: join(resolve('./data'), 'admin-jwt-secret'),
      adminTokenTtlSeconds: 3600,
      logLevel: 'info',
      shutdownTimeoutMs: 10_000,
      grpcTls: null,
    });
  });

  test.each<[string, NodeJS.ProcessEnv, Record<string, unknown>]>([
    ['ephemeral ports', { ADMIN_PORT: '0', GRPC_PORT: '0' }, { adminPort: 0, grpcPort: 0 }],
    ['bind addresses', { ADMIN_HOST: '127.0.0.1', GRPC_HOST: '::1' }, { adminHost: '127.0.0.1', grpcHost: '::1' }],
    ['credentials', { ADMIN_USER: 'ops', ADMIN_PASSWORD: 'pw', ADMIN_JWT_SECRET: 's' }, { adminUser: 'ops', adminPassword: 'pw', adminJwtSecret: 's' }],
    ['empty password means generated', { ADMIN_PASSWORD: '' }, { adminPassword: undefined }],
    ['token ttl', { ADMIN_TOKEN_TTL: '1' }, { adminTokenTtlSeconds: 1 }],
    ['shutdown timeout', { SHUTDOWN_TIMEOUT: '250ms' }, { shutdownTimeoutMs: 250 }],
    ['data dir', { DATA_DIR: '/var/lib/gatehouse' }, { dataDir: '/var/lib/gatehouse', adminPasswordFile: '/var/lib/gatehouse/admin-password' }],
    [
      'kubernetes store defaults',
      { STORE: 'kubernetes', POD_NAME: 'cp-0' },
      { store: 'kubernetes', kubernetes: { namespace: undefined, leaderElection: true, leaseName: 'gatehouse-control-plane', leaseDurationMs: 15_000, identity: 'cp-0' } },
    ],
    [
      'kubernetes store settings',
      { STORE: 'kubernetes', GATEHOUSE_NAMESPACE: 'gw', LEADER_ELECTION: 'false', LEASE_NAME: 'l', LEASE_DURATION: '3s' },
      { kubernetes: { namespace: 'gw', leaderElection: false, leaseName: 'l', leaseDurationMs: 3000 } },
    ],
    ['mTLS files', { GRPC_TLS_CERT: 'c', GRPC_TLS_KEY: 'k', GRPC_TLS_CA: 'a' }, { grpcTls: { cert: 'c', key: 'k', ca: 'a' } }],
  ])('%s', (_name, env, expected) => {
    expect(loadConfig(env)).toMatchObject(expected);
  });

  test.each<[string, NodeJS.ProcessEnv, string]>([
    ['bad LEADER_ELECTION', { STORE: 'kubernetes', LEADER_ELECTION: 'yes' }, 'LEADER_ELECTION must be "true" or "false"'],
    ['bad LEASE_DURATION', { STORE: 'kubernetes', LEASE_DURATION: 'long' }, 'LEASE_DURATION'],
    ['unknown store', { STORE: 'redis' }, 'STORE must be'],
    ['port out of range', { ADMIN_PORT: '70000' }, 'ADMIN_PORT'],
    ['port not a number', { GRPC_PORT: 'http' }, 'GRPC_PORT'],
    ['ttl zero', { ADMIN_TOKEN_TTL: '0' }, 'ADMIN_TOKEN_TTL'],
    ['bad duration', { SHUTDOWN_TIMEOUT: 'soon' }, 'SHUTDOWN_TIMEOUT'],
    ['bad log level', { LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    ['partial mTLS', { GRPC_TLS_CERT: 'c' }, 'GRPC_TLS_CERT, GRPC_TLS_KEY and GRPC_TLS_CA must be set together'],
  ])('rejects %s', (_name, env, message) => {
    expect(() => loadConfig(env)).toThrow(message);
  });
});
