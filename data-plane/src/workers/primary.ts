/**
 * The primary of WORKERS > 1 (docs/operations.md "Workers"): forks the workers, which share PROXY_PORT through
 * node:cluster's round-robin hand-off and each hold their own control-plane stream; re-forks a
 * worker that dies, with backoff; answers STATUS_PORT for the whole process; turns SIGTERM/SIGINT
 * into a graceful shutdown of every worker. It serves no proxy traffic itself.
 */
import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry, Counter, Gauge, Registry } from 'prom-client';
import { bindListener } from '#proto/listen';
import type { Logger } from '#proto/logger';
import type { DataPlaneConfig } from '../config.js';
import { createStatusServer, type StatusSource } from '../status/index.js';
import { isStateReply, REPLACEMENT_PORT_ENV, WORKER_ENV, type StateReply } from './messages.js';

/** A worker that lived this long before dying starts its slot's backoff again from the base. */
const STABLE_MS = 10_000;
const RESTART_BASE_MS = 100;
const RESTART_MAX_MS = 30_000;
/** A worker that does not say what it serves within this time counts as not ready. */
const STATE_TIMEOUT_MS = 1_000;

interface Slot {
  /** 1 to WORKERS: the worker's number, kept by its replacements (metrics label, CP identity). */
  readonly number: number;
  worker: Worker | undefined;
  listening: boolean;
  startedAt: number;
  /** Deaths in a row of workers that lived less than STABLE_MS. */
  crashes: number;
  restart: NodeJS.Timeout | undefined;
}

export function restartDelay(crashes: number): number {
  return Math.min(RESTART_BASE_MS * 2 ** (crashes - 1), RESTART_MAX_MS);
}

export interface WorkerState {
  worker: number;
  pid: number | null;
  /** null: not listening, not answering, or no snapshot yet. */
  version: number | null;
  hash: string | null;
}

/** The process's /readyz from its workers': ready when every one serves; the version is the oldest served. */
export function readinessOf(workers: WorkerState[]): { ready: boolean } & Record<string, unknown> {
  const waiting = workers.filter((w) => w.version === null).map((w) => w.worker);
  if (waiting.length > 0) return { ready: false, reason: `no snapshot yet in worker ${waiting.join(', ')} (each worker's log says why)`, workers };
  // A caller waiting for version >= V then knows that every worker has V.
  const oldest = workers.reduce((a, b) => (b.version! < a.version! ? b : a));
  return { ready: true, version: oldest.version, hash: oldest.hash, workers };
}

export async function runPrimary(config: DataPlaneConfig, logger: Logger): Promise<void> {
  const slots: Slot[] = Array.from({ length: config.workers }, (_, i) => ({
    number: i + 1,
    worker: undefined,
    listening: false,
    startedAt: 0,
    crashes: 0,
    restart: undefined,
  }));
  const registry = new Registry();
  const restarts = new Counter({
    name: 'gatehouse_dataplane_worker_restarts_total',
    help: 'Workers forked again after one died, by worker number.',
    labelNames: ['worker'],
    registers: [registry],
  });
  new Gauge({
    name: 'gatehouse_dataplane_workers',
    help: 'Workers accepting proxy connections (WORKERS is the target).',
    registers: [registry],
    collect() {
      this.set(slots.filter((slot) => slot.listening).length);
    },
  });
  const aggregator = new AggregatorRegistry();

  let nextRequest = 0;
  const pending = new Map<number, (reply: StateReply) => void>();
  cluster.on('message', (_worker, message: unknown) => {
    if (isStateReply(message)) pending.get(message.id)?.(message);
  });

  function stateOf(slot: Slot): Promise<{ version: number | null; hash: string | null }> {
    const worker = slot.worker;
    if (!worker || !slot.listening || !worker.isConnected()) return Promise.resolve({ version: null, hash: null });
    const id = ++nextRequest;
    return new Promise((resolve) => {
      const done = (state: { version: number | null; hash: string | null }): void => {
        clearTimeout(timer);
        pending.delete(id);
        resolve(state);
      };
      const timer = setTimeout(() => done({ version: null, hash: null }), STATE_TIMEOUT_MS);
      pending.set(id, (reply) => done({ version: reply.version, hash: reply.hash }));
      worker.send({ type: 'gatehouse:state-request', id });
    });
  }

  const source: StatusSource = {
    async readiness() {
      const workers = await Promise.all(slots.map(async (slot) => ({ worker: slot.number, pid: slot.worker?.process.pid ?? null, ...(await stateOf(slot)) })));
      return readinessOf(workers);
    },
    async metrics() {
      const [own, workers] = await Promise.all([registry.metrics(), aggregator.clusterMetrics()]);
      return { contentType: registry.contentType, text: `${own}\n${workers}` };
    },
  };

  const status = createStatusServer({ source, logger });
  const statusSetting = { listener: 'status', portVariable: 'STATUS_PORT', hostVariable: 'STATUS_HOST', port: config.statusPort, host: config.statusHost };
  const statusPort = await bindListener(statusSetting, () => status.listen(config.statusPort, config.statusHost));
  logger.info({ listener: 'status', port: statusPort }, 'listening');

  let stopping = false;
  let started = false;
  /** PROXY_PORT as bound (it may be 0 = ephemeral): a replacement announces it before it listens. */
  let proxyPort: number | undefined;
  let startup!: { resolve(): void; reject(failure: { worker: number; code: number | null; signal: string | null }): void };
  const allListening = new Promise<void>((resolve, reject) => {
    startup = { resolve, reject };
  });

  function fork(slot: Slot): void {
    slot.restart = undefined;
    // The primary's DATAPLANE_ID: a default one names the primary's pid, not each worker's.
    const env = { [WORKER_ENV]: String(slot.number), DATAPLANE_ID: config.dataplaneId };
    const worker = cluster.fork(started ? { ...env, [REPLACEMENT_PORT_ENV]: String(proxyPort) } : env);
    slot.worker = worker;
    slot.listening = false;
    slot.startedAt = Date.now();
    worker.once('listening', (address) => {
      proxyPort = address.port;
      slot.listening = true;
      if (!started && slots.every((s) => s.listening)) {
        started = true;
        startup.resolve();
        logger.info({ workers: slots.map((s) => ({ worker: s.number, pid: s.worker?.process.pid })) }, 'workers serving');
      }
    });
    // node:cluster stops handing a worker connections at 'disconnect', which may come just after 'exit'.
    worker.once('exit', (code, signal) => {
      if (worker.isConnected()) worker.once('disconnect', () => onExit(slot, worker, code, signal));
      else onExit(slot, worker, code, signal);
    });
  }

  function onExit(slot: Slot, worker: Worker, code: number | null, signal: string | null): void {
    if (slot.worker !== worker) return;
    slot.worker = undefined;
    slot.listening = false;
    if (stopping) return;
    const fields = { worker: slot.number, pid: worker.process.pid, code, signal };
    if (!started) {
      // Its own fatal line says why (a port in use, a bad file): every other worker would fail alike.
      startup.reject(fields);
      return;
    }
    slot.crashes = Date.now() - slot.startedAt >= STABLE_MS ? 1 : slot.crashes + 1;
    const delayMs = restartDelay(slot.crashes);
    restarts.inc({ worker: String(slot.number) });
    logger.error({ ...fields, delayMs }, 'worker died, forking it again');
    slot.restart = setTimeout(() => fork(slot), delayMs);
  }

  /** Ends every worker the graceful way (its own SIGTERM handler drains within SHUTDOWN_TIMEOUT); true when all exited 0. */
  async function stopWorkers(): Promise<boolean> {
    stopping = true;
    for (const slot of slots) clearTimeout(slot.restart);
    const exits = slots.flatMap((slot) => {
      const worker = slot.worker;
      if (!worker) return [];
      const exited = new Promise<boolean>((resolve) => worker.once('exit', (code) => resolve(code === 0)));
      worker.process.kill('SIGTERM');
      return [exited];
    });
    return (await Promise.all(exits)).every(Boolean);
  }

  const shutdown = async (signal: string): Promise<void> => {
    if (stopping) return;
    logger.info({ signal, timeoutMs: config.shutdownTimeoutMs, workers: config.workers }, 'shutting down');
    // A worker gives up 5 s after SHUTDOWN_DELAY + SHUTDOWN_TIMEOUT; one that is still there after that is stuck.
    setTimeout(
      () => {
        logger.error('workers did not stop in time');
        for (const slot of slots) slot.worker?.process.kill('SIGKILL');
        process.exit(1);
      },
      config.shutdownDelayMs + config.shutdownTimeoutMs + 6_000,
    ).unref();
    status.markDraining();
    const clean = await stopWorkers();
    await status.close();
    logger.info({ clean }, 'stopped');
    process.exit(clean ? 0 : 1);
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));
  // Each worker serves the proxy's TLS with its own copy of the certificate: each re-reads it.
  process.on('SIGHUP', () => {
    for (const slot of slots) slot.worker?.process.kill('SIGHUP');
  });

  if (!config.redisUrl) {
    logger.warn({ workers: config.workers }, 'WORKERS > 1 without REDIS_URL: storage-strategy tokens and local rate_limit counters are kept per worker');
  }
  for (const slot of slots) fork(slot);
  try {
    await allListening;
  } catch (failure) {
    await stopWorkers();
    await status.close();
    logger.fatal(failure, 'a worker exited before the data plane could serve; stopping');
    process.exit(1);
  }
}
