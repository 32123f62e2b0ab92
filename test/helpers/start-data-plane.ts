/**
 * Starts the built data plane as a process on ephemeral loopback ports, connected to a control
 * plane, with fast reconnect backoff so resync tests stay short. `request()` is the one-line way to
 * send a request through its proxy listener.
 */
import { randomBytes } from 'node:crypto';
import { httpRequest, type HttpRequestOptions, type HttpResponse } from './http-request.js';
import { pollUntil } from './poll-until.js';
import { spawnService, type ExitStatus, type ServiceProcess } from './service-process.js';
import { TEST_JOIN_TOKEN } from './start-control-plane.js';

/**
 * The data plane as the image and the chart run it: tsc's output joined into one file by
 * scripts/bundle.mjs (`npm run build` makes both), so the end-to-end tests check what ships.
 */
export const DATA_PLANE_SCRIPT = 'data-plane/bundle/main.js';

export interface StartDataPlaneOptions {
  /** `host:port` of the CP's gRPC listener (ControlPlane.grpcAddr). */
  controlPlaneAddr: string;
  /** DATAPLANE_ID; a unique one is generated when absent. */
  id?: string;
  env?: Record<string, string>;
  /** Wait until /readyz answers 200 (a snapshot is applied). Default true. */
  waitForSnapshot?: boolean;
  /** node's own flags, before the script (e.g. `--trace-gc-nvp`). */
  nodeFlags?: readonly string[];
  /** Sees every line the process writes (spawnService). */
  onLine?: (raw: string) => void;
}

export interface ReadyState {
  status: number;
  ready: boolean;
  version: number | undefined;
  hash: string | undefined;
}

export interface DataPlane {
  readonly id: string;
  readonly proxyUrl: string;
  readonly proxyPort: number;
  readonly statusUrl: string;
  readonly statusPort: number;
  readonly process: ServiceProcess;
  /** A request through the proxy listener: `dp.request('GET', '/foo?x=1', { headers: { host: 'a.test' } })`. */
  request(method: string, pathAndQuery: string, options?: Omit<HttpRequestOptions, 'method'>): Promise<HttpResponse>;
  readyz(): Promise<ReadyState>;
  /** Polls /readyz until the applied version is >= `version`; returns the version seen. */
  waitForVersion(version: number, timeoutMs?: number): Promise<number>;
  recentLogs(n?: number): string;
  stop(): Promise<ExitStatus>;
  kill(): Promise<ExitStatus>;
}

export async function startDataPlane(options: StartDataPlaneOptions): Promise<DataPlane> {
  const id = options.id ?? `dp-${randomBytes(4).toString('hex')}`;
  const proc = await spawnService({
    name: `data-plane ${id}`,
    script: DATA_PLANE_SCRIPT,
    nodeFlags: options.nodeFlags,
    onLine: options.onLine,
    env: {
      PROXY_HOST: '127.0.0.1',
      STATUS_HOST: '127.0.0.1',
      PROXY_PORT: '0',
      STATUS_PORT: '0',
      CONTROL_PLANE_ADDR: options.controlPlaneAddr,
      RECONNECT_BACKOFF_BASE: '100ms',
      RECONNECT_BACKOFF_MAX: '1s',
      SHUTDOWN_TIMEOUT: '5s',
      DATAPLANE_ID: id,
      GRPC_JOIN_TOKEN: TEST_JOIN_TOKEN,
      ...options.env,
    },
    // GATEWAY_HTTPS_PORT set: its listener too (its port in process.ports['gateway-https']).
    listeners: options.env?.GATEWAY_HTTPS_PORT === undefined ? ['proxy', 'status'] : ['proxy', 'status', 'gateway-https'],
  });
  const proxyUrl = `http://127.0.0.1:${proc.ports.proxy}`;
  const statusUrl = `http://127.0.0.1:${proc.ports.status}`;

  const readyz = async (): Promise<ReadyState> => {
    const res = await httpRequest(`${statusUrl}/readyz`, { timeoutMs: 2_000 });
    const body = (res.json ?? {}) as { ready?: unknown; version?: unknown; hash?: unknown };
    return {
      status: res.status,
      ready: body.ready === true,
      version: typeof body.version === 'number' ? body.version : undefined,
      hash: typeof body.hash === 'string' ? body.hash : undefined,
    };
  };

  const dp: DataPlane = {
    id,
    proxyUrl,
    proxyPort: proc.ports.proxy,
    statusUrl,
    statusPort: proc.ports.status,
    process: proc,
    request: (method, pathAndQuery, requestOptions = {}) => httpRequest(`${proxyUrl}${pathAndQuery}`, { ...requestOptions, method }),
    readyz,
    async waitForVersion(version, timeoutMs = 10_000) {
      return pollUntil(
        async () => {
          const state = await readyz();
          return state.status === 200 && state.version !== undefined && state.version >= version ? state.version : undefined;
        },
        { what: `data plane ${id} to apply snapshot version >= ${version}`, timeoutMs, details: () => proc.recentLogs() },
      );
    },
    recentLogs: (n) => proc.recentLogs(n),
    stop: () => proc.stop(),
    kill: () => proc.kill(),
  };

  if (options.waitForSnapshot ?? true) {
    try {
      await pollUntil(async () => ((await readyz()).status === 200 ? true : undefined), {
        what: `data plane ${id} to apply a first snapshot (/readyz 200)`,
        details: () => proc.recentLogs(),
      });
    } catch (err) {
      await proc.kill();
      throw err;
    }
  }
  return dp;
}

/**
 * Asserts that a data plane given `env` (on loopback, port 0, pointed at `controlPlaneAddr`) does not
 * start: it exits 1 and its output contains `message` (the setting it names).
 */
export async function expectDataPlaneRefusesToStart(controlPlaneAddr: string, env: Record<string, string>, message: string): Promise<void> {
  const all = { PROXY_HOST: '127.0.0.1', STATUS_HOST: '127.0.0.1', PROXY_PORT: '0', STATUS_PORT: '0', CONTROL_PLANE_ADDR: controlPlaneAddr, ...env };
  const service = await spawnService({ name: 'DP refused', script: DATA_PLANE_SCRIPT, env: all, listeners: [] });
  expect(await service.exited).toEqual({ code: 1, signal: null });
  expect(service.recentLogs()).toContain(message);
}
