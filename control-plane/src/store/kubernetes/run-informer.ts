/**
 * Starts an informer that is restarted with backoff when its list or watch fails (its cache is kept
 * meanwhile): Service discovery's and the Gateway API's informers. The Kubernetes store has its own
 * restart, tied to its health.
 */
import type { Informer, KubernetesObject } from '@kubernetes/client-node';

export interface InformerRetry {
  baseMs: number;
  maxMs: number;
  /** Pending restarts, cleared by the owner's close(). */
  timers: Set<NodeJS.Timeout>;
  closed(): boolean;
  /** Logs the failure; the restart follows after `retryMs`. */
  failed(err: unknown, retryMs: number): void;
}

/** Calls `changed` on every add, update and delete; resolves when the first start has settled. */
export function runInformer<T extends KubernetesObject>(informer: Informer<T>, changed: (obj: T) => void, retry: InformerRetry): Promise<unknown> {
  let retryMs = retry.baseMs;
  for (const event of ['add', 'update', 'delete'] as const) informer.on(event, changed);
  const start = () => informer.start().then(() => (retryMs = retry.baseMs), restart);
  function restart(err: unknown) {
    if (retry.closed()) return;
    retry.failed(err, retryMs);
    const timer = setTimeout(() => {
      retry.timers.delete(timer);
      void start();
    }, retryMs);
    retry.timers.add(timer);
    retryMs = Math.min(retryMs * 2, retry.maxMs);
  }
  informer.on('error', restart);
  return start();
}
