/**
 * Gives V8's heap back its idle size once the data plane has served no request for IDLE_TRIM_AFTER (README "Data
 * plane memory"). Requests grow the young generation to its maximum (2 × 8 MiB at the chart's setting) and leave the
 * old generation less compact, and V8 shrinks them only in its memory reducer, which starts after a mark-compact
 * that grew the old generation by 10 MiB over the reducer's last run: after request traffic, in our runs never (a
 * 10,000-API DP: 132.6 MiB RSS 20 s after 10 s of load, 128.5 after 60 s). A full GC shrinks the young generation
 * when V8's allocation rate over its last 5 s is low and not zero, so the trim is a scavenge (whose promotions are the
 * allocation V8 then sees; after an idle time with none, V8 takes the rate as unknown) and a full GC after it:
 * the same DP, trimmed, 115.8 MiB with the young generation at 2 MiB. Node has no API for a GC: `gc` is reached by
 * setting V8's --expose-gc at run time and reading it in a context of its own.
 */
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** V8 judges its allocation rate over the last 5 s (kThroughputTimeFrameMs): an idle time shorter than that still sees the traffic. */
export const MIN_IDLE_TRIM_MS = 5_000;

export interface IdleTrimOptions {
  idleMs: number;
  /** Requests started so far: the trim waits for this to stand still. */
  requests: () => number;
  /** After each trim: its pause and the young generation's committed bytes. */
  trimmed?: (pauseMs: number, youngGenerationBytes: number) => void;
  /** The collections (tests count them); V8's own by default. */
  collect?: () => void;
  /** How often the request count is read (default 1 s). */
  checkEveryMs?: number;
}

/** V8's own collections: a scavenge, then a full GC. */
function v8Collect(): () => void {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as (options?: { type: 'minor' | 'major' }) => void;
  return () => {
    gc({ type: 'minor' });
    gc({ type: 'major' });
  };
}

/**
 * The decision, apart from the clock: `check(now, requests)` trims (calls `collect`, returns true) once per idle
 * time of `idleMs` that follows requests, never before the first one, never twice in one idle time.
 */
export function idleTrimmer(idleMs: number, collect: () => void, requests: number, now: number): { check(now: number, requests: number): boolean } {
  let seen = requests;
  let quietSince = now;
  let trimmedAt = requests;
  return {
    check(now, count) {
      if (count !== seen) {
        seen = count;
        quietSince = now;
        return false;
      }
      if (count === trimmedAt || now - quietSince < idleMs) return false;
      trimmedAt = count;
      collect();
      return true;
    },
  };
}

/** Reads the request count every `checkEveryMs` and trims as idleTrimmer decides. */
export function startIdleTrim({ idleMs, requests, trimmed, collect = v8Collect(), checkEveryMs = 1_000 }: IdleTrimOptions): { stop(): void } {
  const trimmer = idleTrimmer(idleMs, collect, requests(), performance.now());
  const timer = setInterval(() => {
    const started = performance.now();
    if (!trimmer.check(started, requests())) return;
    const youngGeneration = getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0;
    trimmed?.(performance.now() - started, youngGeneration);
  }, checkEveryMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
