/** The worker side of WORKERS > 1: its number, its metrics for the primary, its answers to readiness questions. */
import cluster from 'node:cluster';
import { AggregatorRegistry, type Registry } from 'prom-client';
import { setTimeout as sleep } from 'node:timers/promises';
import { isStateRequest, REPLACEMENT_PORT_ENV, WORKER_ENV, type StateReply } from './messages.js';

/** 1 to WORKERS in a forked worker; undefined in a single process (WORKERS=1) and in the primary. */
export function workerNumber(env: NodeJS.ProcessEnv = process.env): number | undefined {
  if (!cluster.isWorker) return undefined;
  const value = Number(env[WORKER_ENV]);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${WORKER_ENV} must be the worker's number, got "${env[WORKER_ENV]}"`);
  return value;
}

/** The port the siblings of a replacement worker serve; undefined for a worker of the first start. */
export function replacementProxyPort(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const raw = env[REPLACEMENT_PORT_ENV];
  return raw ? Number(raw) : undefined;
}

/** Resolves once `done()` holds, checking every `intervalMs` (a replacement waiting for its first snapshot: once per worker start). */
export async function until(done: () => boolean, intervalMs = 20): Promise<void> {
  while (!done()) await sleep(intervalMs);
}

/** Every series of this worker carries `worker="<k>"`; the primary's /metrics collects them over IPC. */
export function exposeWorkerMetrics(registry: Registry, worker: number): void {
  registry.setDefaultLabels({ worker: String(worker) });
  // Constructing one installs prom-client's listener for the primary's requests; the instance itself is not used.
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([registry]);
}

/** Answers the primary's /readyz questions with the snapshot this worker serves (`null` = none). */
export function answerStateRequests(serving: () => { version: number; hash: string } | null): void {
  process.on('message', (message: unknown) => {
    if (!isStateRequest(message)) return;
    const snapshot = serving();
    const reply: StateReply = { type: 'gatehouse:state', id: message.id, version: snapshot?.version ?? null, hash: snapshot?.hash ?? null };
    process.send?.(reply);
  });
}
