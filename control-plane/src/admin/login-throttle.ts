/**
 * Login throttling (exponential backoff) per client address and per user name. The
 * `freeFailures`-th failed login under one key blocks that key for `baseDelayMs`, each further
 * failure doubles the wait, capped at `maxDelayMs`; a blocked key's
 * logins are answered 429 with Retry-After without the credentials being looked at. A successful
 * login clears its keys; a key with no failure for `forgetAfterMs` starts over. Memory is bounded:
 * an LRU of at most `maxKeys` keys (a flood of new names or addresses evicts the oldest).
 */
import { LRUCache } from 'lru-cache';

export interface LoginThrottleOptions {
  freeFailures: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** A key with no failure for this long is forgotten. Default: max(maxDelayMs, 15 min). */
  forgetAfterMs?: number;
  maxKeys?: number;
  /** Milliseconds clock, injectable so the backoff is tested without sleeping. */
  now?: () => number;
}

export interface LoginThrottle {
  /** Milliseconds until a login under any of these keys may be tried; 0 = now. */
  waitMs(keys: readonly string[]): number;
  failed(keys: readonly string[]): void;
  succeeded(keys: readonly string[]): void;
}

interface KeyState {
  failures: number;
  lastFailureAt: number;
  blockedUntil: number;
}

export const DEFAULT_MAX_KEYS = 10_000;

export function createLoginThrottle(options: LoginThrottleOptions): LoginThrottle {
  const { freeFailures, baseDelayMs, maxDelayMs, maxKeys = DEFAULT_MAX_KEYS, now = Date.now } = options;
  const forgetAfterMs = options.forgetAfterMs ?? Math.max(maxDelayMs, 15 * 60_000);
  const keys = new LRUCache<string, KeyState>({ max: maxKeys });

  const live = (key: string, at: number): KeyState | undefined => {
    const state = keys.get(key);
    if (state && at - state.lastFailureAt > forgetAfterMs && at >= state.blockedUntil) {
      keys.delete(key);
      return undefined;
    }
    return state;
  };

  return {
    waitMs(list) {
      const at = now();
      return list.reduce((wait, key) => Math.max(wait, (live(key, at)?.blockedUntil ?? 0) - at), 0);
    },
    failed(list) {
      const at = now();
      for (const key of list) {
        const state = live(key, at) ?? { failures: 0, lastFailureAt: at, blockedUntil: 0 };
        state.failures++;
        state.lastFailureAt = at;
        const doublings = state.failures - freeFailures;
        // 2 ** doublings overflows to Infinity long after the cap; Math.min keeps the cap.
        if (doublings >= 0) state.blockedUntil = at + Math.min(maxDelayMs, baseDelayMs * 2 ** doublings);
        keys.set(key, state);
      }
    },
    succeeded(list) {
      for (const key of list) keys.delete(key);
    },
  };
}
