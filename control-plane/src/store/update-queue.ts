/**
 * What every definition store does alike (index.ts's contract): updates run one at a time in call
 * order, so each mutation sees the result of the previous one; subscribers hear each committed
 * state; close() refuses new updates and waits for the queued ones.
 */
import { GatehouseError } from '#proto/errors';
import type { Logger } from '#proto/logger';
import type { StoreListener, StoreState, UpdateResult } from './index.js';
import { createTurns, settled } from '#proto/turns';

export interface UpdateQueue {
  /** Runs `apply` once every update queued before it has settled; rejects at once after close(). */
  update(apply: () => Promise<UpdateResult>): Promise<UpdateResult>;
  subscribe(listener: StoreListener): () => void;
  /** Tells every subscriber; one that throws is logged and does not keep the state from the others. */
  notify(state: StoreState): void;
  readonly closed: boolean;
  /** Refuses new updates, waits for the queued ones, then forgets the subscribers. */
  close(): Promise<void>;
}

export function createUpdateQueue(logger: Pick<Logger, 'error'>): UpdateQueue {
  const turn = createTurns();
  let closed = false;
  const listeners = new Set<StoreListener>();

  return {
    update(apply) {
      if (closed) return Promise.reject(new GatehouseError('STORE_UNAVAILABLE', 'definition store is closed'));
      return turn(apply);
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    notify(state) {
      for (const listener of listeners) {
        try {
          listener(state);
        } catch (err) {
          logger.error({ err }, 'store listener failed');
        }
      }
    },
    get closed() {
      return closed;
    },
    async close() {
      closed = true;
      await settled(turn);
      listeners.clear();
    },
  };
}
