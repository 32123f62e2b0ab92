/**
 * Writes each CR's `status` Kubernetes-controller style (Gateway API conditions), on the leader only:
 *
 * | condition  | status | reason       | when                                                                |
 * |------------|--------|--------------|---------------------------------------------------------------------|
 * | Accepted   | True   | Accepted     | the spec is valid and holds its name and routes                     |
 * | Accepted   | False  | Invalid      | validation or compile failed (message names the field)              |
 * | Accepted   | False  | NameTaken    | an older CR of the same kind has the same spec.name                 |
 * | Accepted   | False  | Conflicted   | an older definition has the same listen_path + hosts + methods      |
 * | Accepted   | False  | SecretNotFound | a `<field>_secret_ref` names a Secret or key that does not exist  |
 * | Programmed | True   | Programmed   | every synced data plane serves a snapshot with this generation     |
 * | Programmed | False  | Pending      | some synced data planes do not serve it yet                         |
 * | Programmed | False  | Rejected     | a data plane that does not serve it NACKed a snapshot with it       |
 * | Programmed | False  | NoDataPlanes | no data plane has synced, and this generation was never Programmed  |
 * | Programmed | False  | Invalid      | not accepted, so never sent                                         |
 *
 * A data plane counts once it has replied to a snapshot on its current stream ("synced"): one still
 * on its first sync is not asked, and its first ACK is of a snapshot holding every CR. With no synced
 * data plane at all, a generation already Programmed stays so: what was programmed is what the next
 * data plane receives. A NACK of a later snapshot does not touch a CR its sender still serves (the
 * data plane keeps its last good snapshot). Nothing in a status names the fleet's size, so a data
 * plane connecting, syncing or leaving rewrites no status; only a CR whose own verdict or programming
 * changes is written (otherwise every data-plane restart would rewrite every CR's status).
 * The fleet is in `GET /dataplanes` and the metrics.
 *
 * A round looks only at what can have changed (at 10,000 CRs a pass over all of them took tens of ms,
 * and every admin write caused several rounds): the CRs the store reports changed, and those not yet
 * Programmed. A Programmed CR can only lose that when the data planes' lowest ACK falls below the
 * revision that carried it, or when the first data plane syncs after none had: only then, and on
 * becoming leader, does a round look at every CR, yielding to the event loop as it goes.
 *
 * Both carry observedGeneration. A status is written only when it differs from the one the CR
 * holds (lastTransitionTime excluded), so a status write, which changes no spec and so no
 * snapshot, leads to no further write: no loop.
 */
import { isDeepStrictEqual } from 'node:util';
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
  /** The data planes or leadership changed: re-evaluate soon (coalesced). */
  trigger(): void;
  /** These CRs' verdicts changed (null: any may have); re-evaluate them soon. */
  resourcesChanged(uids: ReadonlySet<string> | null): void;
  /** Resolves once no round is queued or running. */
  settled(): Promise<void>;
  close(): Promise<void>;
}

const REJECTION_REASON: Partial<Record<ErrorCode, string>> = {
  API_NAME_TAKEN: 'NameTaken',
  OAUTH_SERVER_NAME_TAKEN: 'NameTaken',
  BASIC_AUTH_USER_TAKEN: 'NameTaken',
  KEY_AUTH_CREDENTIAL_TAKEN: 'NameTaken',
  API_LISTEN_PATH_TAKEN: 'Conflicted',
  API_KEY_TAKEN: 'Conflicted',
  SECRET_REF_NOT_FOUND: 'SecretNotFound',
};

const MAX_MESSAGE = 1024;
/** After a failed status write other than a conflict (apiserver away, forbidden…). */
const RETRY_MS = 5000;

/** What the status of every CR depends on of the data planes' replies, gathered once per round. */
export interface Fleet {
  /** Data planes that replied on their current stream. */
  synced: number;
  /** The lowest version a synced data plane serves (0: one serves nothing of this replica's). */
  minAck: number;
  /** Synced data planes whose last reply is a NACK: what they serve and what they refused. */
  nacks: ReadonlyArray<{ acked: number; version: number; error: string }>;
}

export function fleetOf(dataPlanes: readonly DataPlaneView[]): Fleet {
  let synced = 0;
  let minAck = Number.POSITIVE_INFINITY;
  const nacks: Array<{ acked: number; version: number; error: string }> = [];
  for (const dp of dataPlanes) {
    if (dp.last_ack === null && dp.last_nack === null) continue;
    synced++;
    const acked = dp.last_ack?.version ?? 0;
    minAck = Math.min(minAck, acked);
    if (dp.last_nack !== null && dp.last_nack.version > acked) nacks.push({ acked, version: dp.last_nack.version, error: dp.last_nack.error });
  }
  return { synced, minAck: synced === 0 ? 0 : minAck, nacks };
}

/** Pure: the status a CR should carry, given its verdict (with the status it holds) and the data planes' replies. */
export function desiredStatus(verdict: ResourceVerdict, fleet: Fleet, at: string): Record<string, unknown> {
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
  const programmed = (): Condition => condition('Programmed', true, 'Programmed', 'served by every synced data plane');
  let result: Condition;
  if (fleet.synced === 0) {
    result = wasProgrammed(verdict) ? programmed() : condition('Programmed', false, 'NoDataPlanes', 'no data plane has synced yet');
  } else if (fleet.minAck >= since) result = programmed();
  else {
    const nack = fleet.nacks.find((n) => n.acked < since && n.version >= since);
    result = nack
      ? condition('Programmed', false, 'Rejected', `a data plane rejected it: ${nack.error}`)
      : condition('Programmed', false, 'Pending', `not every synced data plane serves generation ${generation} yet`);
  }
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
  // Compared whole, so a field no longer written (status.dataPlanes, from an earlier release) goes with the next write;
  // and not as JSON text: the apiserver returns an object's keys sorted, so every status read back
  // differed from the one written, and each status write was followed by a second one changing nothing.
  return isDeepStrictEqual({ ...current, conditions: old }, next) ? null : next;
}

/** CRs looked at between two yields to the event loop in a round over every CR. */
const BATCH = 500;
/**
 * Status writes in flight at once, as a controller's worker pool. The store's client-side rate limit
 * (KUBE_API_QPS / KUBE_API_BURST) decides how many the apiserver gets a second; these only keep
 * enough in flight to use it.
 */
const WRITERS = 32;

/**
 * One closure over the controller's state (the coalescing timer, the changed and unsettled CRs, the last
 * fleet), which its short inner functions share; a round's writer pool is the longest of them.
 */
export function createStatusController(deps: {
  store: Pick<KubernetesStore, 'verdicts' | 'patchStatus'>;
  /**
   * Every data plane of every replica, in this replica's version numbers; null when that cannot be known
   * now (another replica's reports could not be read): the round then writes nothing and is tried again,
   * since this replica's data planes alone could call Programmed a CR that the others' do not serve yet.
   */
  dataPlanes(): Promise<readonly DataPlaneView[] | null>;
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
  /** CRs (uids) whose verdict changed since the last round; 'all' when every CR must be looked at. */
  let changed: Set<string> | 'all' = 'all';
  /** CRs whose last look did not leave them Programmed, or whose status write failed. */
  const unsettled = new Set<string>();
  /** The fleet of the last round that looked at every CR it had to. */
  let lastFleet: Fleet | null = null;

  /** Set by every trigger: a round over many CRs then reads the fleet again between batches. */
  let fleetMayHaveChanged = false;

  /** Whether a CR that was Programmed may no longer be (see the file comment). */
  const mayUnprogram = (before: Fleet, now: Fleet) => now.synced > 0 && (before.synced === 0 || now.minAck < before.minAck);

  /** Brings one CR's status to what it should be; remembers it as unsettled when that is not Programmed or the write failed. */
  async function look(uid: string, fleet: Fleet, at: string): Promise<void> {
    const verdict = store.verdicts().get(uid);
    unsettled.delete(uid);
    if (!verdict) return;
    const desired = desiredStatus(verdict, fleet, at);
    if (!verdict.error && (desired.conditions as Condition[])[1]!.status !== 'True') unsettled.add(uid);
    const next = statusUpdate(verdict.status, desired);
    if (!next) return;
    try {
      await store.patchStatus(verdict.resource, verdict.metadataName, next);
    } catch (err) {
      unsettled.add(uid);
      // 409/404: the CR changed or went meanwhile; its watch event triggers the next round.
      const code = (err as { code?: number }).code;
      if (code !== 409 && code !== 404) {
        logger.warn({ err, resource: verdict.metadataName }, 'status write failed');
        retryLater();
      }
    }
  }

  async function reconcile(): Promise<void> {
    if (!deps.isLeader()) {
      changed = 'all';
      return;
    }
    const at = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    const views = await deps.dataPlanes();
    if (views === null) {
      retryLater();
      return;
    }
    let fleet = fleetOf(views);
    fleetMayHaveChanged = false;
    const everyCr = changed === 'all' || lastFleet === null || mayUnprogram(lastFleet, fleet);
    const uids = everyCr ? [...store.verdicts().keys()] : [...new Set([...changed, ...unsettled])];
    changed = new Set();
    let next = 0;
    let stopped = false;
    let fleetMoved = false;
    /**
     * Between batches, the fleet as it is now when a trigger came meanwhile: the CRs not yet looked at get
     * the status it gives them, not one already stale (data planes syncing while a round writes 10,000
     * first statuses would make each CR's NoDataPlanes followed at once by Programmed).
     */
    const refreshFleet = async (): Promise<void> => {
      if (!fleetMayHaveChanged) return;
      fleetMayHaveChanged = false;
      const now = await deps.dataPlanes();
      if (now === null) return;
      const moved = fleetOf(now);
      if (!isDeepStrictEqual(moved, fleet)) {
        fleet = moved;
        fleetMoved = true;
      }
    };
    /** Between batches every writer waits, so none goes on with the fleet being replaced. */
    let pause: Promise<void> | null = null;
    const writer = async (): Promise<void> => {
      while (next < uids.length) {
        if (pause) await pause;
        if (closed || !deps.isLeader()) {
          stopped = true;
          return;
        }
        const i = next++;
        if (i % BATCH === BATCH - 1) {
          pause = (async () => {
            if (everyCr) await new Promise((resolve) => setImmediate(resolve));
            await refreshFleet();
          })().finally(() => (pause = null));
          await pause;
        }
        await look(uids[i]!, fleet, at);
      }
    };
    await Promise.all(Array.from({ length: WRITERS }, writer));
    // Looked at under two fleets: the next round looks at every CR again (it writes only what differs).
    if (stopped || fleetMoved) {
      changed = 'all';
      if (stopped) return;
    }
    lastFleet = fleet;
  }

  function run(): void {
    if (running) {
      again = true;
      return;
    }
    running = reconcile()
      .catch((err: unknown) => {
        changed = 'all';
        logger.error({ err }, 'status reconcile failed');
      })
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
    fleetMayHaveChanged = true;
    if (closed || timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      run();
    }, deps.delayMs ?? 100);
  }

  return {
    trigger,
    resourcesChanged(uids) {
      if (uids === null) changed = 'all';
      else if (changed !== 'all') for (const uid of uids) changed.add(uid);
      trigger();
    },
    async settled() {
      while (timer || running) await (running ?? new Promise((resolve) => setTimeout(resolve, deps.delayMs ?? 100)));
    },
    async close() {
      closed = true;
      clearTimeout(timer);
      await running;
    },
  };
}
