/**
 * cb, the circuit breaker (config: proto/src/plugins/cb.ts; state machine: circuit-breaker.ts), a
 * forward hook. Each attempt asks the breaker of its API and target: refused → 503 CIRCUIT_OPEN
 * without touching the upstream; admitted → the attempt's status (0 without a response) goes
 * through the predicate and is recorded. With `timeout`, an attempt without response headers by
 * then is a 504 (an error for the breaker) and its upstream request is cut at once: a breaker
 * guarding a slow upstream must not leave a connection waiting on it per timed-out request.
 */
import { GatehouseError } from '#proto/errors';
import type { CompiledCb } from '#proto/plugins/index';
import { REFUSED_BUSY, REFUSED_OPEN, type CircuitBreaker } from './circuit-breaker.js';
import { outcomeGrpcStatus, outcomeStatus } from './outcome-status.js';
import type { ForwardNext, UpstreamOutcome } from './pipeline.js';
import type { PluginRuntime } from './runtime.js';

function timedOut(ms: number): UpstreamOutcome {
  return { kind: 'error', error: new GatehouseError('UPSTREAM_TIMEOUT', `no response headers within the cb timeout of ${ms} ms`) };
}

/** The outcome of the attempt `next` starts, or a timeout after `ms` (the attempt is then abandoned; were its outcome to come anyway, it is discarded). */
function withTimeout(next: ForwardNext, ms: number): Promise<UpstreamOutcome> {
  return new Promise((resolve) => {
    let late = false;
    let abandon: (() => void) | null = null;
    const timer = setTimeout(() => {
      late = true;
      abandon?.();
      resolve(timedOut(ms));
    }, ms);
    void next((cut) => {
      abandon = cut;
    }).then((outcome) => {
      if (!late) {
        clearTimeout(timer);
        resolve(outcome);
      } else if (outcome.kind === 'response') {
        outcome.discard();
      }
    });
  });
}

export const cbRuntime: PluginRuntime<CompiledCb> = {
  stage: (cb, { route, breakers }) => {
    const byTarget = new Map<string, CircuitBreaker>();
    for (const t of route.targets) byTarget.set(t.template, breakers.get(route.id, t.template, cb));
    return {
      async forward(ex, next) {
        const breaker = byTarget.get(ex.target!.template)!;
        const admission = breaker.admit();
        if (admission === REFUSED_OPEN || admission === REFUSED_BUSY) {
          const why = admission === REFUSED_OPEN ? 'circuit breaker open' : 'max_concurrent_requests reached';
          return { kind: 'error', error: new GatehouseError('CIRCUIT_OPEN', `${why} for ${ex.target!.template}`) };
        }
        let outcome: UpstreamOutcome | undefined;
        try {
          outcome = cb.timeoutMs > 0 ? await withTimeout(next, cb.timeoutMs) : await next();
        } finally {
          breaker.record(admission, outcome === undefined || cb.failed(outcomeStatus(outcome), ex.req.method ?? 'GET', outcomeGrpcStatus(outcome, ex.req)));
        }
        return outcome;
      },
    };
  },
};
