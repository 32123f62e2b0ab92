/**
 * Upstream health checks: per-target health kept across snapshots (health-checks.ts), read by the
 * balancer, and fed by proxied attempts through the passive stage below.
 */
import type { CompiledTarget } from '#proto/compile/index';
import type { PluginStage } from '../plugins/index.js';
import { outcomeGrpcStatus, outcomeStatus } from '../plugins/outcome-status.js';
import { clientGone } from '../plugins/request-framing.js';
import type { TargetHealth } from './health-checks.js';

export { createHealthRegistry, poolProbe, TargetHealth, type HealthGeneration, type HealthRegistry, type Probe } from './health-checks.js';

/**
 * A forward stage that reports each attempt's status to its target's health (a passive check). The
 * pipeline's innermost stage, so it sees what the upstream did, never a cb refusal; an attempt the
 * client left before it got an answer says nothing about the target.
 */
export function passiveStage(targets: readonly CompiledTarget[], health: readonly TargetHealth[]): PluginStage {
  const byTarget = new Map(targets.map((t, i) => [t, health[i]!]));
  return {
    async forward(ex, next) {
      const outcome = await next();
      if (outcome.kind === 'response' || !clientGone(ex.req)) byTarget.get(ex.target!)?.observe(outcomeStatus(outcome), outcomeGrpcStatus(outcome, ex.req));
      return outcome;
    },
  };
}
