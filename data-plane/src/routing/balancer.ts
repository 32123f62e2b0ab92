/**
 * Target selection for one route. A balancer is created per route when a snapshot is applied
 * and lives as long as that snapshot: its rotation state is per data plane, per route.
 */
import type { CompiledTarget } from '#proto/compile/index';
import type { Balancing } from '#proto/definition/types';

export interface Balancer {
  next(): CompiledTarget;
}

// Classes rather than closures: a balancer exists per route, and a single-target one is 32 bytes
// against ~130 for a closure with its context and wrapper object (heap snapshots of a data plane
// holding 10,000 routes; issue 9).

/** The only target, every time. */
class Single implements Balancer {
  constructor(private readonly target: CompiledTarget) {}
  next(): CompiledTarget {
    return this.target;
  }
}

/** What the balancer reads of a health-checked target (data-plane/src/health). */
export interface TargetHealthView {
  readonly healthy: boolean;
}

/*
 * With `health` (a health-checked route, aligned with the targets), unhealthy targets are skipped and
 * the healthy ones share the load as the rotation would share it among them alone. With none healthy,
 * every target is used (fail open): a wrong health path, or probes that cannot get through, must not
 * turn every request into a 503, and a request to a maybe-dead target costs no more than a refusal.
 */

/** Successive calls return successive (healthy) targets. */
class RoundRobin implements Balancer {
  private index = 0;
  constructor(
    private readonly targets: readonly CompiledTarget[],
    private readonly health: readonly TargetHealthView[] | null,
  ) {}
  next(): CompiledTarget {
    const { targets, health } = this;
    let i = this.index;
    if (health) {
      for (let tries = 0; tries < targets.length && !health[i]!.healthy; tries++) i = (i + 1) % targets.length;
      if (!health[i]!.healthy) i = this.index;
    }
    this.index = (i + 1) % targets.length;
    return targets[i]!;
  }
}

/**
 * Smooth weighted round robin (nginx): each pick adds every weight to its running score, takes
 * the highest score and subtracts the total from it. Weights 3:1 give a a b a, never a a a b,
 * so load is spread evenly over every window of `total` picks. As nginx, a pick leaves unhealthy
 * targets out of the round (their scores stay, the total is the healthy ones'): skipping them after
 * the pick instead would let a heavy dead target take most picks.
 */
class SmoothWeighted implements Balancer {
  // A zero or missing weight is treated as 1 so every defined target stays reachable.
  private readonly weights: number[];
  private readonly scores: number[];
  constructor(
    private readonly targets: readonly CompiledTarget[],
    private readonly health: readonly TargetHealthView[] | null,
  ) {
    this.weights = targets.map((t) => (Number.isInteger(t.weight) && t.weight > 0 ? t.weight : 1));
    this.scores = this.weights.map(() => 0);
  }
  next(): CompiledTarget {
    return this.targets[this.pick(this.health) ?? this.pick(null)!]!;
  }
  /** The index picked among the healthy targets (all when `health` is null); null when none is. */
  private pick(health: readonly TargetHealthView[] | null): number | null {
    const { scores, weights } = this;
    let best = -1;
    let total = 0;
    for (let i = 0; i < scores.length; i++) {
      if (health && !health[i]!.healthy) continue;
      scores[i]! += weights[i]!;
      total += weights[i]!;
      if (best < 0 || scores[i]! > scores[best]!) best = i;
    }
    if (best < 0) return null;
    scores[best]! -= total;
    return best;
  }
}

/** `health`: for health-checked routes, each target's health (in the order of `targets`). */
export function createBalancer(balancing: Balancing, targets: readonly CompiledTarget[], health?: readonly TargetHealthView[] | null): Balancer {
  if (targets.length === 0) throw new Error('a route needs at least one target');
  if (targets.length === 1) return new Single(targets[0]!);
  return balancing === 'weight' ? new SmoothWeighted(targets, health ?? null) : new RoundRobin(targets, health ?? null);
}
