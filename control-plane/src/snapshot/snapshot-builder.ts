/**
 * Turns store states into snapshot versions: one Snapshot message per content hash, encoded at most
 * once (at start, and later when a data plane first needs the whole), plus the delta from the previous
 * version, encoded once; the same bytes then go to every data plane (go-control-plane: encode once, send
 * many). A data plane that (re)connects holding one of the last RECENT_VERSIONS versions, or the current
 * content under any version, or that fell behind while its stream was full, is sent a delta from what it
 * holds (`deltaFrom`): applying a full snapshot takes a serving data plane's request thread for time that grows
 * with the configuration, a delta of a few definitions about a millisecond.
 */
import { deltaSize, snapshotContent, toDeltaMessage, toSnapshotMessage, type SnapshotContent } from '#proto/snapshot/codec';
import type { Logger } from '#proto/logger';
import type { DefinitionStore, StoreState } from '../store/index.js';

export interface EncodedDelta {
  /** The version (and content hash) this delta applies to: the previous snapshot. */
  readonly baseVersion: number;
  readonly baseHash: string;
  /** Encoded gatehouse.v1.SnapshotDelta. */
  readonly bytes: Buffer;
  /** Definitions it adds, changes or removes. */
  readonly size: number;
}

export interface EncodedSnapshot {
  readonly version: number;
  readonly hash: string;
  /** Encoded gatehouse.v1.Snapshot, built on first read and kept. */
  readonly bytes: Buffer;
  /** From the previous snapshot to this one; null for the first (and without encodeDelta). */
  readonly delta: EncodedDelta | null;
  /**
   * The delta to this snapshot from what a data plane holds (`version` with content `hash`): `delta` when that
   * is its base, else one encoded on first use; null when that version is not among the recent ones (and
   * without encodeDelta). The same content under another version gets an empty delta.
   */
  deltaFrom(version: number, hash: string): EncodedDelta | null;
}

/**
 * Versions a data plane may hold and still be sent a delta. Each kept version holds its definition lists
 * (8 bytes a definition) and the definitions later versions replaced.
 */
export const RECENT_VERSIONS = 16;

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
  /** From loadGatehouseProto(); absent = no deltas (every push is a full snapshot). */
  encodeDelta?(delta: object): Buffer;
  /** The key_auth installation key (api-key.ts), served with snapshots that hold key_auth credentials. */
  keyAuthHashKey?: string;
  logger: Logger;
}

export function createSnapshotBuilder({ store, encodeSnapshot, encodeDelta, keyAuthHashKey, logger }: SnapshotBuilderOptions): SnapshotBuilder {
  const listeners = new Set<SnapshotListener>();

  /** The last RECENT_VERSIONS contents built, oldest first: the bases `deltaFrom` knows. */
  const recent: SnapshotContent[] = [];

  /** What a state is served as: its hash covers the installation key when it is carried (snapshotContent). */
  const contentOf = (state: StoreState): SnapshotContent => snapshotContent(state.revision, state.defs, state.hash, keyAuthHashKey, state.gatewayTls);

  function encodedDelta(base: SnapshotContent, next: SnapshotContent): EncodedDelta | null {
    if (!encodeDelta) return null;
    const message = toDeltaMessage(base, next);
    return Object.freeze({ baseVersion: base.version, baseHash: base.hash, bytes: encodeDelta(message), size: deltaSize(message) });
  }

  function build(state: SnapshotContent, previous: SnapshotContent | null, defsHash: string): EncodedSnapshot {
    let bytes: Buffer | undefined;
    const delta = previous ? encodedDelta(previous, state) : null;
    // Data planes reconnecting after a CP restart or a network break mostly hold the same base: encoded once for all.
    const catchUps = new Map<string, EncodedDelta | null>();
    return Object.freeze({
      version: state.version,
      hash: state.hash,
      get bytes() {
        return (bytes ??= encodeSnapshot(toSnapshotMessage(state.version, state.defs, defsHash, keyAuthHashKey, state.gatewayTls)));
      },
      delta,
      deltaFrom(version: number, hash: string) {
        if (delta && delta.baseVersion === version && delta.baseHash === hash) return delta;
        const key = `${version} ${hash}`;
        if (catchUps.has(key)) return catchUps.get(key)!;
        const base = hash === state.hash ? { ...state, version } : recent.find((s) => s.version === version && s.hash === hash);
        const made = base ? encodedDelta(base, state) : null;
        if (catchUps.size < RECENT_VERSIONS) catchUps.set(key, made);
        return made;
      },
    });
  }

  const remember = (content: SnapshotContent) => {
    recent.push(content);
    if (recent.length > RECENT_VERSIONS) recent.shift();
  };
  let built = contentOf(store.current());
  remember(built);
  let current = build(built, null, store.current().hash);
  // Encoded now, not at the first connect: data planes (re)connect right after a CP start, and their cold
  // sync would otherwise wait for this encode.
  void current.bytes;

  const unsubscribe = store.subscribe((state) => {
    const content = contentOf(state);
    if (content.hash === current.hash) return;
    try {
      current = build(content, built, state.hash);
      built = content;
      remember(content);
    } catch (err) {
      // A failed build publishes nothing: data planes keep the last good snapshot.
      logger.error({ err, revision: state.revision }, 'snapshot build failed');
      return;
    }
    logger.info({ version: current.version, hash: current.hash, deltaBytes: current.delta?.bytes.length, changes: current.delta?.size }, 'snapshot built');
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
