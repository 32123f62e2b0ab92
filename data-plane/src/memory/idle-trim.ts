/**
 * Gives V8's heap back its idle size once the data plane has served no request for IDLE_TRIM_AFTER (docs/operations.md
 * "Data plane memory"). Requests grow the young generation to its maximum (2 × 8 MiB at the chart's setting) and leave
 * the old generation less compact, and V8 shrinks them only in its memory reducer, which starts after a mark-compact
 * that grew the old generation by 10 MiB over the reducer's last run: request traffic alone does not start it. A
 * full GC shrinks the young generation
 * when V8's allocation rate, over the samples it took at its collections back to 5 s (kThroughputTimeFrameMs), is
 * low (under 1,000 bytes per ms) and not zero. So the trim is two collections, WINDOW_MS apart:
 * - a scavenge, once requests stood still for IDLE_TRIM_AFTER: it closes V8's sample of the traffic's last
 *   allocation (up to a whole young generation since the last scavenge, 8 MiB: over 5 s of idling still above
 *   V8's threshold, so both collections at once may shrink nothing), and its promotions
 *   are allocation after that sample, so the next one is not zero (an idle time without any counts as unknown);
 * - a full GC WINDOW_MS later if no request came meanwhile, which then sees only the idle time.
 * The full GC pauses the process for longer than V8's own, which mark incrementally under load: a request arriving
 * meanwhile waits. Node has no API for a GC: `gc` is reached by setting V8's --expose-gc at run time and reading it
 * in a context of its own. Not a compacting GC (`--compact-on-every-full-gc` for the trim alone): it gives back a
 * little more for a pause many times as long.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { heapSpace, youngGenerationBytes } from './young-generation.js';

/** V8's allocation-rate window and then some: the full GC's sample must hold only the idle time. */
const WINDOW_MS = 6_000;

/**
 * The old generation's growth since the trim's last full GC (or its start) below which the full GC is skipped: it
 * would pause the process (longer the larger the configuration) for little. Requests promote ~150–200 bytes each
 * (`scripts/gc-per-request.sh`), so this is ~20,000 requests' worth. A few requests between idle times then pay no
 * pause; a burst still has its garbage collected.
 */
export const FULL_GC_AFTER_GROWTH = 4 * 2 ** 20;

export interface IdleTrimOptions {
  idleMs: number;
  /** Requests started so far: the trim waits for this to stand still. */
  requests: () => number;
  /** After each trim: its pause (both collections), the young generation's committed bytes, whether the full GC ran. */
  trimmed?: (pauseMs: number, youngGenerationBytes: number, fullGc: boolean) => void;
  /** The collections; V8's own by default. */
  collections?: Collections;
  /** How often the request count is read (default 1 s). */
  checkEveryMs?: number;
  /** From the scavenge to the full GC (default WINDOW_MS; tests shorten it). */
  windowMs?: number;
}

export interface Collections {
  scavenge(): void;
  full(): void;
  /** Bytes the old generation's objects take, dead ones not yet collected included. */
  oldGenerationUsed(): number;
}

/**
 * V8's own collections through its `gc` extension. In node 20's V8 (11.3) any argument makes `gc` a scavenge:
 * `gc({ type: 'major' })` runs one too (`--trace-gc`: "Scavenge … testing") and leaves the old generation a load
 * leaves behind. Only `gc()` with no argument is a mark-compact (idle-trim.test.ts checks it).
 */
export function v8Collections(): Collections {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as (minor?: boolean) => void;
  return {
    scavenge: () => gc(true),
    full: () => gc(),
    oldGenerationUsed: () => heapSpace('old_space').used,
  };
}

/**
 * The decision, apart from the clock: `check(now, requests)` answers what to collect now. Once per idle time that
 * follows requests (never before the first one): 'scavenge' when they have stood still for `idleMs`, then 'full'
 * WINDOW_MS later if they still have; a request in between starts over.
 */
export function idleTrimmer(
  idleMs: number,
  requests: number,
  now: number,
  windowMs = WINDOW_MS,
): { check(now: number, requests: number): 'scavenge' | 'full' | null } {
  let seen = requests;
  let quietSince = now;
  let trimmedAt = requests;
  /** When the scavenge of this idle time ran; null before it. */
  let scavengedAt: number | null = null;
  return {
    check(now, count) {
      if (count !== seen) {
        seen = count;
        quietSince = now;
        scavengedAt = null;
        return null;
      }
      if (count === trimmedAt) return null;
      if (scavengedAt === null) {
        if (now - quietSince < idleMs) return null;
        scavengedAt = now;
        return 'scavenge';
      }
      if (now - scavengedAt < windowMs) return null;
      trimmedAt = count;
      scavengedAt = null;
      return 'full';
    },
  };
}

/**
 * Reads the request count every `checkEveryMs` and collects as idleTrimmer decides; the full GC only once the old
 * generation grew by FULL_GC_AFTER_GROWTH since the last one (a mark-compact of V8's own lowers it, and the growth
 * with it), else a second scavenge in its place.
 */
export function startIdleTrim({ idleMs, requests, trimmed, collections = v8Collections(), checkEveryMs = 1_000, windowMs }: IdleTrimOptions): { stop(): void } {
  const trimmer = idleTrimmer(idleMs, requests(), performance.now(), windowMs);
  let afterFullGc = collections.oldGenerationUsed();
  let paused = 0;
  const timer = setInterval(() => {
    const started = performance.now();
    const step = trimmer.check(started, requests());
    if (step === null) return;
    // A skipped full GC leaves a second scavenge in its place: V8 shrinks the young generation at that one too.
    const fullGc = step === 'full' && collections.oldGenerationUsed() - afterFullGc >= FULL_GC_AFTER_GROWTH;
    if (!fullGc) collections.scavenge();
    else {
      collections.full();
      afterFullGc = collections.oldGenerationUsed();
    }
    paused += performance.now() - started;
    if (step === 'scavenge') return;
    trimmed?.(paused, youngGenerationBytes(), fullGc);
    paused = 0;
  }, checkEveryMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
