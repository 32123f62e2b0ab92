/**
 * Runs `call` with a signal that aborts after `ms`, for the gateway's own calls to upstreams
 * (introspection, health probes). A timer of our own, cleared when the call ends, rather than
 * AbortSignal.timeout(): that one would still fire afterwards (and destroy an already consumed body,
 * with nobody listening for the error). A call that fails once the deadline passed fails with `reason()`.
 */
export async function withDeadline<T>(ms: number, reason: () => Error, call: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(reason()), ms);
  try {
    return await call(controller.signal);
  } catch (err) {
    throw controller.signal.aborted ? controller.signal.reason : err;
  } finally {
    clearTimeout(timer);
  }
}
