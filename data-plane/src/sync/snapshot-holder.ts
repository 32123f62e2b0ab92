/**
 * The data plane's one piece of configuration state: the applied snapshot. main.ts creates one
 * holder; the snapshot client (and the cold-start cache) apply messages to it: it decodes and checks them, has the
 * table builder (table/) turn their content into a serving table, and swaps that in. Every proxied request reads
 * `current()` once and uses that table to the end, so it never sees half of one.
 *
 * A delta is applied on top of the held content only, and its table built on the held one (table/build.ts).
 *
 * A full snapshot that arrives while one serves (applyInTurns) is decoded, validated, hashed, indexed and given its
 * routing table in turns, the requests in flight served between them, and then swapped in as apply() does.
 */
import {
  applyDeltaMessage,
  applyDeltaMessageInTurns,
  fromSnapshotMessage,
  fromSnapshotMessageInTurns,
  prepareForDeltas,
  type ContentChange,
  type DeltaMessage,
  type SnapshotContent,
  type SnapshotMessage,
} from '#proto/snapshot/codec';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { YoungGenerationHold } from '../memory/index.js';
import { prepareInTurns, type BuiltTable, type Prepared, type ServingTable, type TableBasis, type TableBuilder, type TableSource } from '../table/index.js';

const noop = (): void => {};

export type ApplyResult = { ok: true; version: number; hash: string; changed: boolean } | { ok: false; version: number; error: string };

export interface SnapshotHolder extends TableSource {
  /** Builds everything first, then swaps one reference; on error keeps the old snapshot. */
  apply(message: SnapshotMessage): ApplyResult;
  /**
   * apply() for a data plane that serves requests meanwhile: decoding, validating, hashing, compiling and the
   * routing table run in turns of APPLY_TURN definitions (routes, tree nodes) with the event loop's I/O between
   * them, the held snapshot serving; the rest and the swap as apply() does. Resolves null without applying when
   * `wanted()` turns false between turns (its stream went down).
   */
  applyInTurns(message: SnapshotMessage, wanted?: () => boolean): Promise<ApplyResult | null>;
  /** Same, for a delta on top of the held content (refused unless that is exactly its base). */
  applyDelta(delta: DeltaMessage): ApplyResult;
  /**
   * A large delta (LARGE_DELTA definitions or more) in turns as applyInTurns applies a full snapshot: its definitions
   * decoded, validated and the result hashed, its changes made to the held index, its changed routes found and the
   * routing table built, then swapped in as applyDelta does (the unchanged routes keep their state).
   */
  applyDeltaInTurns(delta: DeltaMessage, wanted?: () => boolean): Promise<ApplyResult | null>;
  /** The held content (definitions), for the snapshot cache; null before the first snapshot. */
  content(): SnapshotContent | null;
}

/**
 * Definitions per turn of applyInTurns: a few ms of work per turn, so a serving data plane's requests wait at most
 * that long, where a full snapshot applied at once would hold them for the whole apply (scripts/bench-full-apply.mjs).
 */
export const APPLY_TURN = 200;

/**
 * Definitions a delta adds, changes or removes from which a serving data plane applies it in turns
 * (applyDeltaInTurns): applied at once, a delta that large would pause its requests for tens of ms or more
 * (scripts/bench-large-delta.mjs).
 */
export const LARGE_DELTA = 1000;

/** Runs steps that yield between turns, letting the event loop's I/O (requests) run after each. */
async function inTurns<T>(steps: Generator<void, T>, wanted: () => boolean): Promise<T | null> {
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
    await new Promise<void>((resolve) => setImmediate(resolve));
    if (!wanted()) return null;
  }
}

export function createSnapshotHolder(deps: {
  /** Builds the serving table of each snapshot (table/; main.ts passes the process's one). */
  tables: TableBuilder;
  registry?: Registry;
  /** Keeps V8's young generation from growing while a full snapshot is applied (young-generation.ts; main.ts passes the process's). Tests leave it out. */
  holdYoungGeneration?: YoungGenerationHold;
  /** Ends the process's start-up hold (start-up-hold.ts) once the first snapshot is applied. */
  endStartUpHold?: () => void;
}): SnapshotHolder {
  let applied: ServingTable | null = null;
  /** What a delta's table builds on: the held content and what was built from it. */
  let held: TableBasis | null = null;
  const applies = deps.registry
    ? new Counter({
        name: 'gatehouse_snapshot_applies_total',
        help: 'Snapshot pushes handled, by result (applied, unchanged, rejected).',
        labelNames: ['result'],
        registers: [deps.registry],
      })
    : null;
  if (deps.registry) {
    new Gauge({
      name: 'gatehouse_snapshot_version',
      help: 'Version of the applied snapshot (0 before the first).',
      registers: [deps.registry],
      collect() {
        this.set(applied?.version ?? 0);
      },
    });
    new Gauge({
      name: 'gatehouse_snapshot_routes',
      help: 'Routes in the applied snapshot.',
      registers: [deps.registry],
      collect() {
        this.set(applied?.routing.size ?? 0);
      },
    });
  }

  function swap(
    version: number,
    content: () => SnapshotContent & { changes?: ContentChange[] },
    previous: TableBasis | null,
    prepared?: Prepared,
  ): ApplyResult {
    let built: BuiltTable;
    try {
      const { changes, ...next } = content();
      built = deps.tables.build(next, previous && applied && changes ? { basis: previous, table: applied, changes } : null, prepared);
    } catch (err) {
      applies?.inc({ result: 'rejected' });
      return { ok: false, version, error: err instanceof Error ? err.message : String(err) };
    }
    applied = built.table;
    held = built.basis;
    built.commit();
    applies?.inc({ result: 'applied' });
    return { ok: true, version: built.table.version, hash: built.table.hash, changed: true };
  }

  /** After a full snapshot's swap: what deltas on it need is prepared once it is served, not on the path of the first. */
  function served(result: ApplyResult, endHold: () => void): ApplyResult {
    if (!result.ok) {
      endHold();
      return result;
    }
    const { defs } = held!.content;
    setImmediate(() => {
      prepareForDeltas(defs);
      endHold();
      deps.endStartUpHold?.();
    });
    return result;
  }

  /** The CP's answer to a Hello naming the content it serves (after its restart, say): the held content under its version. */
  function sameContent(delta: DeltaMessage): boolean {
    return applied !== null && delta?.hash === applied.hash && delta.base_hash === applied.hash && Number(delta.base_version) === applied.version;
  }

  /**
   * The content `steps` give (a full snapshot's, or a large delta's on the held content), then its index and routing
   * table, all in turns (requests served between them), then the swap; null when `wanted()` turned false meanwhile.
   * A large delta's index is `previous`'s with the changes made (applyChangesInTurns), so its unchanged definitions keep
   * their compiled routes and, when still held at the swap, what was built for them (table/build.ts: upstreams with their
   * balancer positions, the authorizer with its verification caches, when no server changed).
   */
  async function wholeInTurns(
    version: number,
    steps: Generator<void, SnapshotContent & { changes?: ContentChange[] }>,
    wanted: () => boolean,
    previous: TableBasis | null = null,
  ): Promise<ApplyResult | null> {
    const endHold = deps.holdYoungGeneration?.() ?? noop;
    let content: (SnapshotContent & { changes?: ContentChange[] }) | null;
    let prepared: Prepared | null;
    try {
      content = await inTurns(steps, wanted);
      prepared = content && (await inTurns(prepareInTurns(content, previous, APPLY_TURN), wanted));
    } catch (err) {
      endHold();
      applies?.inc({ result: 'rejected' });
      return { ok: false, version, error: err instanceof Error ? err.message : String(err) };
    }
    if (!content || !prepared) {
      endHold();
      return null;
    }
    const whole = content;
    // Built on `previous` only while it is what is applied; otherwise as a full snapshot is (the index is whole either way).
    return served(
      swap(version, () => whole, previous !== null && held === previous ? previous : null, prepared),
      endHold,
    );
  }

  /** Same content: nothing to rebuild. The CP's version is authoritative, so adopt it. */
  function unchanged(version: number): ApplyResult {
    if (version !== applied!.version) applied = { ...applied!, version };
    applies?.inc({ result: 'unchanged' });
    return { ok: true, version, hash: applied!.hash, changed: false };
  }

  /** What a delta builds on: the held content under the applied version (the CP's, adopted by `unchanged`). */
  const heldContent = (): SnapshotContent | null => (held && applied ? { ...held.content, version: applied.version } : null);

  /** Whether a full snapshot names the content already applied. */
  const holdsHash = (message: SnapshotMessage): boolean => applied !== null && !!message?.hash && message.hash === applied.hash;

  return {
    current: () => applied,
    content: heldContent,
    apply(message) {
      const version = Number(message?.version ?? 0);
      if (holdsHash(message)) return unchanged(version);
      const endHold = deps.holdYoungGeneration?.() ?? noop;
      return served(
        swap(version, () => fromSnapshotMessage(message), null),
        endHold,
      );
    },
    async applyInTurns(message, wanted = () => true) {
      const version = Number(message?.version ?? 0);
      if (holdsHash(message)) return unchanged(version);
      return wholeInTurns(version, fromSnapshotMessageInTurns(message, APPLY_TURN), wanted);
    },
    async applyDeltaInTurns(delta, wanted = () => true) {
      const version = Number(delta?.version ?? 0);
      if (sameContent(delta)) return unchanged(version);
      const base = heldContent();
      if (!base) return { ok: false, version, error: 'delta without a held snapshot' };
      return wholeInTurns(version, applyDeltaMessageInTurns(base, delta, APPLY_TURN), wanted, held);
    },
    applyDelta(delta) {
      const version = Number(delta?.version ?? 0);
      if (sameContent(delta)) return unchanged(version);
      const base = heldContent();
      return swap(
        version,
        () => {
          if (!base) throw new Error('delta without a held snapshot');
          return applyDeltaMessage(base, delta);
        },
        held,
      );
    },
  };
}
