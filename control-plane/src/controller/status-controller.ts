/**
 * Writes each CR's `status` Kubernetes-controller style (Gateway API conditions), on the leader only:
 *
 * | condition  | status | reason       | when                                                                |
 * |------------|--------|--------------|---------------------------------------------------------------------|
 * | Accepted   | True   | Accepted     | the spec is valid and holds its name and routes                     |
 * | Accepted   | False  | Invalid      | validation or compile failed (message names the field)              |
 * | Accepted   | False  | NameTaken    | an older CR of the same kind has the same spec.name                 |
 * | Accepted   | False  | Conflicted   | an older definition has the same listen_path + hosts + methods      |
 * | Programmed | True   | Programmed   | every synced data plane ACKed a snapshot with this generation       |
 * | Programmed | False  | Pending      | some synced data planes have not ACKed it yet                       |
 * | Programmed | False  | Rejected     | a data plane NACKed it (message: the error)                         |
 * | Programmed | False  | NoDataPlanes | no data plane has synced, and this generation was never Programmed  |
 * | Programmed | False  | Invalid      | not accepted, so never sent                                         |
 *
 * A data plane counts once it has replied to a snapshot on its current stream ("synced"): one still
 * on its first sync is not asked, and its first ACK is of a snapshot holding every CR. With no synced
 * data plane at all, a generation already Programmed stays so: what was programmed is what the next
 * data plane receives. Nothing in a status names the fleet's size, so a data plane connecting,
 * syncing or leaving rewrites no status; only a CR whose own verdict or programming changes is
 * written (at 10,000 CRs, a data-plane restart used to cost up to 30,000 status writes). The fleet is in
 * `GET /dataplanes` and the metrics.
 *
 * Both carry observedGeneration. A status is written only when it differs from the one the CR
 * holds (lastTransitionTime excluded), so a status write, which changes no spec and so no
 * snapshot, leads to no further write: no loop.
 */
import type { ErrorCode } from '#proto/errors';
import type { Logger } from '#proto/logger';
import type { KubernetesStore, ResourceVerdict } from '../store/kubernetes/kubernetes-store.js';

/** What the controller needs of each connected data plane (grpc/ DataPlaneStatus fits). */
export interface DataPlaneView {
  id: string;
  last_ack: { version: number } | null;
  last_nack: { version: number; error: string } | null;
}

export interface Condition {
  type: 'Accepted' | 'Programmed';
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  observedGeneration: number;
  lastTransitionTime: string;
}

export interface StatusController {
  /** Something changed (CRs, data planes, leadership): re-evaluate soon (coalesced). */
  trigger(): void;
  close(): Promise<void>;
}

const REJECTION_REASON: Partial<Record<ErrorCode, string>> = {
  API_NAME_TAKEN: 'NameTaken',
  OAUTH_SERVER_NAME_TAKEN: 'NameTaken',
  BASIC_AUTH_USER_TAKEN: 'NameTaken',
  API_LISTEN_PATH_TAKEN: 'Conflicted',
};

const MAX_MESSAGE = 1024;
/** After a failed status write other than a conflict (apiserver away, forbidden…). */
const RETRY_MS = 5000;

/** Pure: the status a CR should carry, given its verdict (with the status it holds) and the data planes' replies. */
export function desiredStatus(verdict: ResourceVerdict, dataPlanes: readonly DataPlaneView[], at: string): Record<string, unknown> {
  const generation = verdict.generation;
  const condition = (type: Condition['type'], ok: boolean, reason: string, message: string): Condition => ({
    type,
    status: ok ? 'True' : 'False',
    reason,
    message: message.slice(0, MAX_MESSAGE),
    observedGeneration: generation,
    lastTransitionTime: at,
  });
  if (verdict.error) {
    return {
      conditions: [
        condition('Accepted', false, REJECTION_REASON[verdict.error.code] ?? 'Invalid', verdict.error.message),
        condition('Programmed', false, 'Invalid', 'not accepted, so not sent to data planes'),
      ],
    };
  }
  const since = verdict.sinceRevision ?? Number.POSITIVE_INFINITY;
  const synced = dataPlanes.filter((dp) => dp.last_ack !== null || dp.last_nack !== null);
  const nack = synced.find(
    (dp) => dp.last_nack !== null && dp.last_nack.version >= since && dp.last_nack.version > (dp.last_ack?.version ?? 0),
  )?.last_nack;
  const programmed = (): Condition => condition('Programmed', true, 'Programmed', 'served by every synced data plane');
  let result: Condition;
  if (nack) result = condition('Programmed', false, 'Rejected', `a data plane rejected it: ${nack.error}`);
  else if (synced.length === 0) {
    result = wasProgrammed(verdict) ? programmed() : condition('Programmed', false, 'NoDataPlanes', 'no data plane has synced yet');
  } else if (synced.every((dp) => (dp.last_ack?.version ?? 0) >= since)) result = programmed();
  else result = condition('Programmed', false, 'Pending', `not every synced data plane serves generation ${generation} yet`);
  return { conditions: [condition('Accepted', true, 'Accepted', 'definition is valid'), result] };
}

function wasProgrammed(verdict: ResourceVerdict): boolean {
  const conditions = (Array.isArray(verdict.status?.conditions) ? verdict.status.conditions : []) as Condition[];
  const c = conditions.find((o) => o.type === 'Programmed');
  return c?.status === 'True' && c.observedGeneration === verdict.generation;
}

/** Keeps lastTransitionTime of conditions whose status did not change; null when nothing differs. */
export function statusUpdate(current: Record<string, unknown> | undefined, desired: Record<string, unknown>): Record<string, unknown> | null {
  const old = (Array.isArray(current?.conditions) ? current.conditions : []) as Condition[];
  const conditions = (desired.conditions as Condition[]).map((c) => {
    const prev = old.find((o) => o.type === c.type);
    return prev && prev.status === c.status ? { ...c, lastTransitionTime: prev.lastTransitionTime } : c;
  });
  const next = { ...desired, conditions };
  // Compared whole, so a field no longer written (status.dataPlanes, before 2026-11) goes with the next write.
  const comparable = (s: unknown) => JSON.stringify(s ?? {});
  return comparable({ ...current, conditions: old }) === comparable(next) ? null : next;
}

export function createStatusController(deps: {
  store: KubernetesStore;
  /** Every data plane of every replica, in this replica's version numbers. */
  dataPlanes(): Promise<readonly DataPlaneView[]>;
  isLeader(): boolean;
  logger: Logger;
  /** Coalescing delay (default 100 ms). */
  delayMs?: number;
}): StatusController {
  const { store, logger } = deps;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | null = null;
  let again = false;
  let closed = false;

  async function reconcile(): Promise<void> {
    if (!deps.isLeader()) return;
    const at = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    const dataPlanes = await deps.dataPlanes();
    for (const verdict of store.verdicts()) {
      if (closed || !deps.isLeader()) return;
      const next = statusUpdate(verdict.status, desiredStatus(verdict, dataPlanes, at));
      if (!next) continue;
      try {
        await store.patchStatus(verdict.resource, verdict.metadataName, next);
      } catch (err) {
        // 409/404: the CR changed or went meanwhile; its watch event triggers the next round.
        const code = (err as { code?: number }).code;
        if (code !== 409 && code !== 404) {
          logger.warn({ err: String((err as Error)?.message ?? err).slice(0, 300), resource: verdict.metadataName }, 'status write failed');
          retryLater();
        }
      }
    }
  }

  function run(): void {
    if (running) {
      again = true;
      return;
    }
    running = reconcile()
      .catch((err: unknown) => logger.error({ err }, 'status reconcile failed'))
      .finally(() => {
        running = null;
        if (again && !closed) {
          again = false;
          trigger();
        }
      });
  }

  function retryLater(): void {
    if (closed) return;
    setTimeout(trigger, RETRY_MS).unref();
  }

  function trigger(): void {
    if (closed || timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      run();
    }, deps.delayMs ?? 100);
  }

  return {
    trigger,
    async close() {
      closed = true;
      clearTimeout(timer);
      await running;
    },
  };
}
