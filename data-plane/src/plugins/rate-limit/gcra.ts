/**
 * GCRA (generic cell rate algorithm), pure: one client's stored theoretical arrival time (TAT) and
 * the clock in, a decision and the TAT to store out. The Lua script of rate-limiter.ts is this same
 * function, run inside Redis. Whole microseconds throughout, so the arithmetic is exact.
 */

export interface RateDecision {
  allowed: boolean;
  /** Requests the client may still send at once (X-RateLimit-Remaining). */
  remaining: number;
  /** µs until the full limit is available again (X-RateLimit-Reset). */
  resetInUs: number;
  /** µs until a request would be admitted; 0 when this one was (Retry-After). */
  retryAfterUs: number;
}

export interface GcraStep extends RateDecision {
  /** TAT to store when allowed (the stored one, unchanged, when refused). */
  tat: number;
}

/**
 * `stored`: the client's TAT, undefined when none (a TAT in the past counts as now). Admitted while
 * the new TAT stays within `windowUs` of now: `windowUs / intervalUs` requests at once, then one per
 * `intervalUs`.
 */
export function gcra(stored: number | undefined, nowUs: number, intervalUs: number, windowUs: number): GcraStep {
  const tat = stored !== undefined && stored > nowUs ? stored : nowUs;
  const next = tat + intervalUs;
  const allowAt = next - windowUs;
  if (allowAt > nowUs) return { allowed: false, remaining: 0, resetInUs: tat - nowUs, retryAfterUs: allowAt - nowUs, tat };
  return { allowed: true, remaining: Math.floor((windowUs - (next - nowUs)) / intervalUs), resetInUs: next - nowUs, retryAfterUs: 0, tat: next };
}
