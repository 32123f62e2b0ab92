/**
 * retry (config: proto/src/plugins/retry.ts), a forward hook. A request whose method is listed is
 * tried up to `attempts` times while the predicate says the attempt failed, waiting `backoff`
 * before the second try and twice as long before each further one (plus up to 50% jitter, as
 * Janus). Each try goes through the route's balancer (the proxy picks the next target for it).
 * Never retried: an attempt after a byte of the request body went upstream (the body streams and
 * is not kept), and anything once the response has started (attempts are decided before a byte
 * is written to the client). The last attempt's outcome is what the client gets.
 *
 * gRPC calls (always POST) are retried whatever `methods` lists, as Envoy retries them: their status says whether
 * a try may be repeated. A gRPC call's body is kept (forward-hooks.ts) so a try answered Trailers-Only (its status
 * in the head, `grpcStatus` ≥ 0: the server refused before answering a message) may be resent after its body went
 * upstream; any other failure of a call whose body went upstream is final, as for every request.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { CompiledRetry } from '#proto/plugins/index';
import { NO_GRPC_STATUS } from '#proto/plugins/index';
import { isGrpcCall } from './grpc-web.js';
import { outcomeGrpcStatus, outcomeStatus } from './outcome-status.js';
import type { PluginRuntime } from './runtime.js';

/** The wait before try `n` (2, 3, …): backoff · 2^(n−2), plus up to half of it at random. */
export function backoffBefore(n: number, backoffMs: number, random: () => number = Math.random): number {
  const base = backoffMs * 2 ** (n - 2);
  return Math.round(base + (random() * base) / 2);
}

export const retryRuntime: PluginRuntime<CompiledRetry> = {
  stage: (retry) => ({
    async forward(ex, next) {
      const method = ex.req.method ?? 'GET';
      let outcome = await next();
      if (!retry.methods.has(method) && !isGrpcCall(ex.req)) return outcome;
      for (let n = 2; n <= retry.attempts; n++) {
        const grpcStatus = outcomeGrpcStatus(outcome, ex.req);
        if (!retry.retryOn(outcomeStatus(outcome), method, grpcStatus)) return outcome;
        if (ex.bodySent && !(ex.bodyKept && grpcStatus !== NO_GRPC_STATUS)) return outcome;
        if (outcome.kind === 'response') outcome.discard();
        if (retry.backoffMs > 0) await sleep(backoffBefore(n, retry.backoffMs));
        outcome = await next();
      }
      return outcome;
    },
  }),
};
