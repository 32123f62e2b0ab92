/**
 * The definition store: the one place definitions live, with a revision that increases on every
 * content change. The file store is the embedded implementation; a Kubernetes store (custom
 * resources) implements the same interface.
 */
import type { Definitions } from '#proto/definition/index';
import type { GatewayListenerTls } from '#proto/snapshot/codec';

export interface StoreState {
  /** Increases by one on every change of content; this is the snapshot version. */
  readonly revision: number;
  readonly defs: Definitions;
  /** definitionsHash(defs), kept so nobody hashes the same content twice. */
  readonly hash: string;
  /** What the data planes are served only (discovery/service-targets.ts): the Gateway API HTTPS listeners, never stored. */
  readonly gatewayTls?: readonly GatewayListenerTls[];
}

export interface UpdateResult extends StoreState {
  /** False when the mutation produced the same content (no new revision, no event). */
  readonly changed: boolean;
}

/**
 * Computes the new definitions from the current ones, or throws to reject the write (the store
 * is then left untouched). Must not mutate its argument: build new arrays/objects instead.
 */
export type Mutation = (current: Definitions) => Definitions | Promise<Definitions>;

export type StoreListener = (state: StoreState) => void;

export interface DefinitionStore {
  current(): StoreState;
  /** Mutations run one at a time, in call order; the result is durable when the promise resolves. */
  update(mutation: Mutation): Promise<UpdateResult>;
  /** Called after every committed change (not for no-op updates). Returns an unsubscribe function. */
  subscribe(listener: StoreListener): () => void;
  /** Resolves when the backing storage is reachable and writable; rejects with STORE_UNAVAILABLE otherwise. */
  checkReady(): Promise<void>;
  /** Waits for queued updates, then refuses new ones. */
  close(): Promise<void>;
}
