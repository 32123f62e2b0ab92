/**
 * Starts the built control plane as a process on ephemeral loopback ports with its own temporary
 * DATA_DIR; `restart()` brings it back on the same ports and DATA_DIR, as an operator restarting the
 * service would.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnService, type ExitStatus, type ServiceProcess } from './service-process.js';

/**
 * The control plane as the image and the chart run it: tsc's output joined into one file by
 * scripts/bundle.mjs (`npm run build` makes it), so the end-to-end tests check what ships.
 */
export const CONTROL_PLANE_SCRIPT = 'control-plane/bundle/main.js';

/**
 * The join token every helper-started CP requires and every helper-started DP presents (a CP with no
 * data-plane credential generates one of its own). A test overrides it with `GRPC_JOIN_TOKEN: ''`
 * (none: the CP generates one, or GRPC_INSECURE=true accepts any DP) or another token.
 */
export const TEST_JOIN_TOKEN = 'test-join-token-0123456789abcdef';

export interface StartControlPlaneOptions {
  name?: string;
  /** Extra or overriding environment (e.g. ADMIN_TOKEN_TTL). */
  env?: Record<string, string>;
  /** Reuse an existing DATA_DIR instead of a fresh temporary one. */
  dataDir?: string;
  /** Leave ADMIN_PASSWORD unset so the CP generates one into DATA_DIR/admin-password. */
  generatedPassword?: boolean;
  /** How long to wait for the listeners (default that of spawnService); the 10k-CR bench needs more. */
  startTimeoutMs?: number;
  /** Node flags before the script (e.g. --cpu-prof, which NODE_OPTIONS does not take). */
  nodeFlags?: readonly string[];
  /** Another build of the CP (the benchmarks' BENCH_CP_SCRIPT, e.g. tsc's control-plane/dist/main.js); default the bundle. */
  script?: string;
  /** Sees every line the CP prints, as it comes. */
  onLine?: (raw: string) => void;
}

export interface ControlPlane {
  readonly name: string;
  readonly adminUrl: string;
  readonly adminPort: number;
  readonly grpcPort: number;
  /** `127.0.0.1:<grpc port>`, the DP's CONTROL_PLANE_ADDR. */
  readonly grpcAddr: string;
  readonly dataDir: string;
  readonly username: string;
  readonly password: string;
  /** The GRPC_JOIN_TOKEN it was started with; '' = none given. */
  readonly joinToken: string;
  /** The current process (a new one after restart()). */
  readonly process: ServiceProcess;
  recentLogs(n?: number): string;
  /** SIGTERM; resolves with the exit status (expect code 0). */
  stop(): Promise<ExitStatus>;
  /** SIGKILL. */
  kill(): Promise<ExitStatus>;
  /** Starts again, same ports and DATA_DIR; the previous process must have exited. */
  restart(): Promise<void>;
  /** Stops the process if it runs and removes a DATA_DIR this helper created. */
  dispose(): Promise<void>;
}

export async function startControlPlane(options: StartControlPlaneOptions = {}): Promise<ControlPlane> {
  const name = options.name ?? 'control-plane';
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), 'gatehouse-cp-')));
  const ownsDataDir = options.dataDir === undefined;
  const username = options.env?.ADMIN_USER ?? 'admin';
  const configuredPassword = options.generatedPassword ? undefined : (options.env?.ADMIN_PASSWORD ?? randomBytes(12).toString('hex'));

  const baseEnv: Record<string, string> = {
    ADMIN_HOST: '127.0.0.1',
    GRPC_HOST: '127.0.0.1',
    GRPC_JOIN_TOKEN: TEST_JOIN_TOKEN,
    DATA_DIR: dataDir,
    SHUTDOWN_TIMEOUT: '5s',
    ...options.env,
  };
  if (configuredPassword !== undefined) baseEnv.ADMIN_PASSWORD = configuredPassword;

  const launch = (ports: { admin: string; grpc: string }): Promise<ServiceProcess> =>
    spawnService({
      name,
      script: options.script ?? CONTROL_PLANE_SCRIPT,
      env: { ADMIN_PORT: ports.admin, GRPC_PORT: ports.grpc, ...baseEnv },
      nodeFlags: options.nodeFlags,
      listeners: ['admin', 'grpc'],
      startTimeoutMs: options.startTimeoutMs,
      onLine: options.onLine,
    });

  let current = await launch({ admin: '0', grpc: '0' });
  const adminPort = current.ports.admin;
  const grpcPort = current.ports.grpc;

  let password = configuredPassword;
  if (password === undefined) {
    const file = join(dataDir, 'admin-password');
    try {
      password = (await readFile(file, 'utf8')).trim();
    } catch (err) {
      await current.kill();
      throw new Error(`${name}: no generated password at ${file}: ${(err as Error).message}\n${current.recentLogs()}`);
    }
  }

  return {
    name,
    adminUrl: `http://127.0.0.1:${adminPort}`,
    adminPort,
    grpcPort,
    grpcAddr: `127.0.0.1:${grpcPort}`,
    dataDir,
    username,
    password,
    joinToken: baseEnv.GRPC_JOIN_TOKEN ?? '',
    get process() {
      return current;
    },
    recentLogs: (n) => current.recentLogs(n),
    stop: () => current.stop(),
    kill: () => current.kill(),
    async restart() {
      if (current.running()) throw new Error(`${name}.restart(): the previous process (pid ${current.pid}) is still running`);
      current = await launch({ admin: String(adminPort), grpc: String(grpcPort) });
    },
    async dispose() {
      if (current.running()) await current.stop();
      if (ownsDataDir) await rm(dataDir, { recursive: true, force: true });
    },
  };
}
