/**
 * Control-plane configuration from environment variables (SPEC §1 + process contract).
 * Read once by main.ts; everything else receives the resulting object.
 */
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { tryParseDuration } from '#proto/duration';
import { GatehouseError } from '#proto/errors';
import { tlsFilesFromEnv, type TlsFiles } from '#proto/grpc';

export interface ControlPlaneConfig {
  adminHost: string;
  adminPort: number;
  grpcHost: string;
  grpcPort: number;
  store: 'file' | 'kubernetes';
  /** STORE=kubernetes only. */
  kubernetes: KubernetesConfig | null;
  dataDir: string;
  adminUser: string;
  /** Unset: generated once into `adminPasswordFile`. */
  adminPassword: string | undefined;
  adminPasswordFile: string;
  /** Unset: generated once into `adminJwtSecretFile`. */
  adminJwtSecret: string | undefined;
  adminJwtSecretFile: string;
  adminTokenTtlSeconds: number;
  logLevel: string;
  shutdownTimeoutMs: number;
  grpcTls: TlsFiles | null;
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
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

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

function nonEmpty(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value === '' ? undefined : value;
}

export function loadConfig(env: NodeJS.ProcessEnv): ControlPlaneConfig {
  const store = env.STORE || 'file';
  if (store !== 'file' && store !== 'kubernetes') throw invalid('STORE', `must be "file" or "kubernetes", got "${store}"`);
  const leaderElection = env.LEADER_ELECTION || 'true';
  if (leaderElection !== 'true' && leaderElection !== 'false') throw invalid('LEADER_ELECTION', 'must be "true" or "false"');
  const kubernetes: KubernetesConfig | null =
    store === 'kubernetes'
      ? {
          namespace: nonEmpty(env, 'GATEHOUSE_NAMESPACE'),
          leaderElection: leaderElection === 'true',
          leaseName: env.LEASE_NAME || 'gatehouse-control-plane',
          leaseDurationMs: duration(env, 'LEASE_DURATION', '15s'),
          identity: env.POD_NAME || `${hostname()}-${process.pid}`,
        }
      : null;

  const logLevel = env.LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel)) throw invalid('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}`);

  const adminUser = env.ADMIN_USER || 'admin';
  const dataDir = resolve(env.DATA_DIR || './data');

  return {
    adminHost: env.ADMIN_HOST || '0.0.0.0',
    adminPort: port(env, 'ADMIN_PORT', 8081),
    grpcHost: env.GRPC_HOST || '0.0.0.0',
    grpcPort: port(env, 'GRPC_PORT', 8082),
    store,
    kubernetes,
    dataDir,
    adminUser,
    adminPassword: nonEmpty(env, 'ADMIN_PASSWORD'),
    adminPasswordFile: join(dataDir, 'admin-password'),
    adminJwtSecret: nonEmpty(env, 'ADMIN_JWT_SECRET'),
    adminJwtSecretFile: join(dataDir, 'admin-jwt-secret'),
    adminTokenTtlSeconds: positiveInteger(env, 'ADMIN_TOKEN_TTL', 3600),
    logLevel,
    shutdownTimeoutMs: duration(env, 'SHUTDOWN_TIMEOUT', '10s'),
    grpcTls: tlsFilesFromEnv(env),
  };
}
