/**
 * Login throttling, per client address and per user name, so neither an address nor a user name is
 * guessed fast, and failures from other addresses never lock the right user out.
 *
 * - Per address (exponential backoff): the `freeFailures`-th failed login from one address blocks
 *   that address for `baseDelayMs`, each further failure doubles the wait, capped at `maxDelayMs`.
 *   An IPv6 address counts as its /64 (one host usually holds the whole /64).
 * - Per user name (token bucket of failures): `userBurst` failures, refilled by one every
 *   `userRefillMs`. With the bucket empty, an address that has failed before waits for the next
 *   token; an address with no failure on record still has its password checked, so the right
 *   password from a clean address logs in while others guess, and each guess spends that address.
 *
 * A blocked login is answered 429 with Retry-After without the credentials being looked at. A
 * success clears its address; the user bucket only refills with time. An address with no failure for
 * `forgetAfterMs` starts over. Memory is bounded: an LRU of at most `maxKeys` addresses and as many
 * user names.
 */
import { LRUCache } from 'lru-cache';
import { addressWords } from '#proto/plugins/ip-restriction';

export interface LoginThrottleOptions {
  freeFailures: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** Failed logins per user name before its rate applies. Default: 20. */
  userBurst?: number;
  /** One more failed login per user name is allowed every this many milliseconds. Default: 1 min. */
  userRefillMs?: number;
  /** An address with no failure for this long is forgotten. Default: max(maxDelayMs, 15 min). */
  forgetAfterMs?: number;
  maxKeys?: number;
  /** Milliseconds clock, injectable so the backoff is tested without sleeping. */
  now?: () => number;
}

export interface LoginThrottle {
  /** Milliseconds until this address may try a login as this user name; 0 = now. */
  waitMs(address: string, user: string): number;
  failed(address: string, user: string): void;
  succeeded(address: string, user: string): void;
}

interface AddressState {
  failures: number;
  lastFailureAt: number;
  blockedUntil: number;
}

interface UserBucket {
  tokens: number;
  at: number;
}

export const DEFAULT_MAX_KEYS = 10_000;

/** The throttled unit of an address: an IPv6 address by its /64, anything else as written. */
export function addressKey(address: string): string {
  const words = addressWords(address);
  if (!words || (words[0] === 0 && words[1] === 0)) return address;
  return `${words[0].toString(16)}:${words[1].toString(16)}::/64`;
}

export function createLoginThrottle(options: LoginThrottleOptions): LoginThrottle {
  const { freeFailures, baseDelayMs, maxDelayMs, userBurst = 20, userRefillMs = 60_000, maxKeys = DEFAULT_MAX_KEYS, now = Date.now } = options;
  const forgetAfterMs = options.forgetAfterMs ?? Math.max(maxDelayMs, 15 * 60_000);
  const addresses = new LRUCache<string, AddressState>({ max: maxKeys });
  const users = new LRUCache<string, UserBucket>({ max: maxKeys });

  const addressState = (address: string, at: number): AddressState | undefined => {
    const key = addressKey(address);
    const state = addresses.get(key);
    if (state && at - state.lastFailureAt > forgetAfterMs && at >= state.blockedUntil) {
      addresses.delete(key);
      return undefined;
    }
    return state;
  };

  /** The user's bucket refilled up to now; an unknown user name has a full one. */
  const bucket = (user: string, at: number): UserBucket => {
    const state = users.get(user);
    if (!state) return { tokens: userBurst, at };
    const refilled = Math.floor((at - state.at) / userRefillMs);
    state.tokens = Math.min(userBurst, state.tokens + refilled);
    // A full bucket's refill clock starts at its next failure.
    state.at = state.tokens === userBurst ? at : state.at + refilled * userRefillMs;
    return state;
  };

  return {
    waitMs(address, user) {
      const at = now();
      const state = addressState(address, at);
      if (!state) return 0; // a clean address is always heard
      const addressWait = Math.max(0, state.blockedUntil - at);
      const tokens = bucket(user, at);
      const userWait = tokens.tokens > 0 ? 0 : tokens.at + userRefillMs - at;
      return Math.max(addressWait, userWait);
    },
    failed(address, user) {
      const at = now();
      const state = addressState(address, at) ?? { failures: 0, lastFailureAt: at, blockedUntil: 0 };
      state.failures++;
      state.lastFailureAt = at;
      const doublings = state.failures - freeFailures;
      // 2 ** doublings overflows to Infinity long after the cap; Math.min keeps the cap.
      if (doublings >= 0) state.blockedUntil = at + Math.min(maxDelayMs, baseDelayMs * 2 ** doublings);
      addresses.set(addressKey(address), state);
      const tokens = bucket(user, at);
      tokens.tokens = Math.max(0, tokens.tokens - 1);
      users.set(user, tokens);
    },
    succeeded(address) {
      addresses.delete(addressKey(address));
    },
  };
}
