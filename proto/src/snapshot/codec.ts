/**
 * Snapshot codec: Definitions <-> the typed protobuf Snapshot message (plain objects in the
 * shape @grpc/proto-loader produces with keepCase), and the content hash over a canonical
 * encoding (so a reordering of the store is not a change).
 * OWNER: definitions helper. Signatures are a contract.
 */
import type { Definitions } from '../definition/types.js';

/** Snapshot message as plain object (field names as in gatehouse.proto). */
export interface SnapshotMessage {
  version: number;
  hash: string;
  apis: unknown[];
  oauth_servers: unknown[];
}

/** sha256 hex over the canonical (sorted by name, stable key order) encoding. */
export function definitionsHash(defs: Definitions): string {
  throw new Error('not implemented');
}

export function toSnapshotMessage(version: number, defs: Definitions): SnapshotMessage {
  throw new Error('not implemented');
}

/** Inverse of toSnapshotMessage; throws on a message that does not describe valid definitions. */
export function fromSnapshotMessage(msg: SnapshotMessage): { version: number; hash: string; defs: Definitions } {
  throw new Error('not implemented');
}
