/**
 * Polling with a deadline: every wait in the e2e suite goes through here so that a hang turns
 * into a failure that says what was awaited, the last value seen and the processes' recent logs.
 */

export interface PollOptions {
  /** What is awaited, for the failure message ("data plane dp-1 at version 4"). */
  what: string;
  timeoutMs?: number;
  intervalMs?: number;
  /** Extra context appended to the failure message (typically recent log lines). */
  details?: () => string;
}

/**
 * Calls `probe` until it returns something other than `undefined`; throws after `timeoutMs`.
 * A probe that throws counts as "not yet" (the error is reported if the deadline passes).
 */
export async function pollUntil<T>(probe: () => Promise<T | undefined>, options: PollOptions): Promise<T> {
  const { what, timeoutMs = 10_000, intervalMs = 50, details } = options;
  const deadline = Date.now() + timeoutMs;
  let last = 'no attempt completed';
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
      last = 'probe returned nothing yet';
    } catch (err) {
      last = `last attempt failed: ${(err as Error).message}`;
    }
    if (Date.now() >= deadline) {
      const extra = details ? `\n${details()}` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (${last})${extra}`);
    }
    await delay(intervalMs);
  }
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
