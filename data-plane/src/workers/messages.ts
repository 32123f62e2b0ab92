/** What the primary and its workers say to each other over the cluster IPC channel (besides prom-client's own). */

/** Environment of a forked worker: its number, 1 to WORKERS (kept by its replacement after a crash). */
export const WORKER_ENV = 'GATEHOUSE_WORKER';
/** Environment of a worker forked to replace one that died: the proxy port its siblings already serve. */
export const REPLACEMENT_PORT_ENV = 'GATEHOUSE_REPLACEMENT_PORT';

export interface StateRequest {
  type: 'gatehouse:state-request';
  id: number;
}

/** The snapshot a worker serves; null version while it holds none or is shutting down. */
export interface StateReply {
  type: 'gatehouse:state';
  id: number;
  version: number | null;
  hash: string | null;
}

export function isStateRequest(message: unknown): message is StateRequest {
  return (message as StateRequest | null)?.type === 'gatehouse:state-request';
}

export function isStateReply(message: unknown): message is StateReply {
  return (message as StateReply | null)?.type === 'gatehouse:state';
}
