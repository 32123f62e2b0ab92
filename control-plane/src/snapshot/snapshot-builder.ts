/**
 * Turns store states into snapshot versions: one Snapshot message per content hash, encoded once;
 * the same bytes then go to every data plane (go-control-plane: encode once, send many).
 */
import { toSnapshotMessage } from '#proto/snapshot/codec';
import type { Logger } from '#proto/logger';
import type { DefinitionStore, StoreState } from '../store/index.js';

export interface EncodedSnapshot {
  readonly version: number;
  readonly hash: string;
  /** Encoded gatehouse.v1.Snapshot. */
  readonly bytes: Buffer;
}

export type SnapshotListener = (snapshot: EncodedSnapshot) => void;

/** What the gRPC server consumes: the current snapshot and new ones as they are built. */
export interface SnapshotSource {
  current(): EncodedSnapshot;
  subscribe(listener: SnapshotListener): () => void;
}

export interface SnapshotBuilder extends SnapshotSource {
  close(): void;
}

export interface SnapshotBuilderOptions {
  store: Pick<DefinitionStore, 'current' | 'subscribe'>;
  /** From loadGatehouseProto(). */
  encodeSnapshot(message: object): Buffer;
  logger: Logger;
}

export function createSnapshotBuilder({ store, encodeSnapshot, logger }: SnapshotBuilderOptions): SnapshotBuilder {
  const listeners = new Set<SnapshotListener>();

  function build(state: StoreState): EncodedSnapshot {
    const message = toSnapshotMessage(state.revision, state.defs, state.hash);
    return Object.freeze({ version: message.version, hash: message.hash, bytes: encodeSnapshot(message) });
  }

  let current = build(store.current());

  const unsubscribe = store.subscribe((state) => {
    if (state.hash === current.hash) return;
    try {
      current = build(state);
    } catch (err) {
      // A failed build publishes nothing: data planes keep the last good snapshot.
      logger.error({ err, revision: state.revision }, 'snapshot build failed');
      return;
    }
    logger.info({ version: current.version, hash: current.hash, bytes: current.bytes.length }, 'snapshot built');
    for (const listener of listeners) {
      try {
        listener(current);
      } catch (err) {
        logger.error({ err }, 'snapshot listener failed');
      }
    }
  });

  return {
    current: () => current,
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close() {
      unsubscribe();
      listeners.clear();
    },
  };
}
