/**
 * Target selection for one route. A balancer is created per route when a snapshot is applied
 * and lives as long as that snapshot: its rotation state is per data plane, per route.
 */
import type { CompiledTarget } from '#proto/compile/index';
import type { Balancing } from '#proto/definition/types';

export interface Balancer {
  next(): CompiledTarget;
}

/** Successive calls return successive targets. */
function roundRobin(targets: readonly CompiledTarget[]): Balancer {
  let index = 0;
  return {
    next() {
      const target = targets[index]!;
      index = (index + 1) % targets.length;
      return target;
    },
  };
}

/**
 * Smooth weighted round robin (nginx): each pick adds every weight to its running score, takes
 * the highest score and subtracts the total from it. Weights 3:1 give a a b a, never a a a b,
 * so load is spread evenly over every window of `total` picks.
 */
function smoothWeighted(targets: readonly CompiledTarget[]): Balancer {
  // A zero or missing weight is treated as 1 so every defined target stays reachable.
  const weights = targets.map((t) => (Number.isInteger(t.weight) && t.weight > 0 ? t.weight : 1));
  const total = weights.reduce((sum, w) => sum + w, 0);
  const scores = weights.map(() => 0);
  return {
    next() {
      let best = 0;
      for (let i = 0; i < scores.length; i++) {
        scores[i]! += weights[i]!;
        if (scores[i]! > scores[best]!) best = i;
      }
      scores[best]! -= total;
      return targets[best]!;
    },
  };
}

export function createBalancer(balancing: Balancing, targets: readonly CompiledTarget[]): Balancer {
  if (targets.length === 0) throw new Error('a route needs at least one target');
  if (targets.length === 1) {
    const only = targets[0]!;
    return { next: () => only };
  }
  return balancing === 'weight' ? smoothWeighted(targets) : roundRobin(targets);
}
