/**
 * Reconnect delay: capped exponential backoff with full jitter (AWS "Exponential Backoff And
 * Jitter"): a uniform draw in [0, min(max, base * 2^attempt)). Full jitter spreads the
 * reconnects of many data planes after a control-plane restart.
 */
export interface BackoffOptions {
  baseMs: number;
  maxMs: number;
}

/** `attempt` counts failures since the last successful push, from 0. `random` returns [0, 1). */
export function backoffDelay(attempt: number, options: BackoffOptions, random: () => number = Math.random): number {
  // 2^attempt overflows to Infinity for huge attempts; min() then caps it.
  const ceiling = Math.min(options.maxMs, options.baseMs * 2 ** Math.max(0, attempt));
  return Math.floor(random() * ceiling);
}
