/**
 * gRPC's `grpc-timeout` (PROTOCOL-HTTP2.md: `TimeoutValue TimeoutUnit`, 1 to 8 digits then one of these units),
 * the time the client gives the call:
 *
 * | unit | meaning      | ms per unit |
 * |------|--------------|-------------|
 * | `H`  | hours        | 3,600,000   |
 * | `M`  | minutes      | 60,000      |
 * | `S`  | seconds      | 1,000       |
 * | `m`  | milliseconds | 1           |
 * | `u`  | microseconds | 0.001       |
 * | `n`  | nanoseconds  | 0.000001    |
 */
const GRPC_TIMEOUT = /^(\d{1,8})([HMSmun])$/;
const UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1_000, m: 1, u: 1e-3, n: 1e-6 };

/** Milliseconds of a grpc-timeout value; null when it is none (the spec gives an intermediary no rule for those: it is forwarded as sent, for the server to judge). */
export function parseGrpcTimeout(value: string | string[] | undefined): number | null {
  const m = typeof value === 'string' ? GRPC_TIMEOUT.exec(value) : null;
  return m ? Number(m[1]) * UNIT_MS[m[2]!]! : null;
}

/** The time left, as a grpc-timeout value: whole milliseconds while they fit in 8 digits, else coarser units. */
export function formatGrpcTimeout(ms: number): string {
  const whole = Math.max(0, Math.floor(ms));
  if (whole < 1e8) return `${whole}m`;
  const seconds = Math.floor(whole / 1000);
  return seconds < 1e8 ? `${seconds}S` : `${Math.min(99_999_999, Math.floor(seconds / 3600))}H`;
}

/** The longest wait setTimeout takes (a longer one fires at once). */
export const MAX_TIMER_MS = 2 ** 31 - 1;
