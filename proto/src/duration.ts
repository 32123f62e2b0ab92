/**
 * Duration strings as used in definitions and env vars ("250ms", "5s", "1m", "1.5s", "1m30s"):
 * Go's time.ParseDuration syntax (which Janus-era configs use), limited to ms/s/m/h units,
 * positive values and at most one hour, so a typo cannot disable a timeout.
 */
import { GatehouseError } from './errors.js';

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const WHOLE = /^(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ms|s|m|h))+$/;
const PARTS = /(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)/g; // only used through matchAll, which copies it
export const MAX_DURATION_MS = 3_600_000;

/**
 * Strings parsed so far: a configuration repeats a few durations ("30s") in every definition, which a
 * data plane's cold sync would otherwise parse several times per API. Bounded,
 * since the strings come from admin input: past the bound, strings are parsed uncached.
 */
const parsed = new Map<string, number | null>();
const MAX_CACHED = 1024;

/** Milliseconds (rounded to an integer) of a duration string, or null when it is not a valid one. */
export function tryParseDuration(s: string): number | null {
  return tryParseDurationUpTo(s, MAX_DURATION_MS);
}

/** tryParseDuration with another upper bound than one hour (proxy_cache's ttl: up to a day). */
export function tryParseDurationUpTo(s: string, maxMs: number): number | null {
  if (typeof s !== 'string' || s.length === 0 || s.length > 64) return null;
  let ms = parsed.get(s);
  if (ms === undefined) {
    ms = null;
    if (WHOLE.test(s)) {
      let sum = 0;
      for (const m of s.matchAll(PARTS)) sum += Number(m[1]) * UNIT_MS[m[2]];
      ms = Math.round(sum);
    }
    if (parsed.size < MAX_CACHED) parsed.set(s, ms);
  }
  return ms !== null && ms >= 1 && ms <= maxMs ? ms : null;
}

/** Milliseconds of a duration string; throws VALIDATION_FAILED on junk, zero, negatives or more than 1h. */
export function parseDuration(s: string): number {
  const ms = tryParseDuration(s);
  if (ms === null) {
    throw new GatehouseError('VALIDATION_FAILED', `${JSON.stringify(s)} is not a valid duration (e.g. "250ms", "5s", "1m"; more than 0, at most 1h)`);
  }
  return ms;
}
