/**
 * cb, the circuit breaker (config: proto/src/plugins/cb.ts; state machine: circuit-breaker.ts), a
 * forward hook. Each attempt asks the breaker of its API and target: refused → 503 CIRCUIT_OPEN
 * without touching the upstream; admitted → the attempt's status (0 without a response) goes
 * through the predicate and is recorded. With `timeout`, an attempt without response headers by
 * then is a 504 (an error for the breaker); the abandoned attempt is cut when its headers arrive
 * or at the route's response_header_timeout.
 */
import { GatehouseError } from '#proto/errors';
import type { CompiledCb } from '#proto/plugins/index';
import { REFUSED_BUSY, REFUSED_OPEN, type CircuitBreaker } from './circuit-breaker.js';
import { outcomeStatus } from './outcome-status.js';
import type { UpstreamOutcome } from './pipeline.js';
import type { PluginRuntime } from './runtime.js';

function timedOut(ms: number): UpstreamOutcome {
  return { kind: 'error', error: new GatehouseError('UPSTREAM_TIMEOUT', `no response headers within the cb timeout of ${ms} ms`) };
}

/** The attempt's outcome, or a timeout after `ms` (the late outcome is then discarded). */
function withTimeout(attempt: Promise<UpstreamOutcome>, ms: number): Promise<UpstreamOutcome> {
  return new Promise((resolve) => {
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      resolve(timedOut(ms));
    }, ms);
    void attempt.then((outcome) => {
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
          outcome = cb.timeoutMs > 0 ? await withTimeout(next(), cb.timeoutMs) : await next();
        } finally {
          breaker.record(admission, outcome === undefined || cb.failed(outcomeStatus(outcome), ex.req.method ?? 'GET'));
        }
        return outcome;
      },
    };
  },
};
