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

/** Successive calls return successive targets. */
class RoundRobin implements Balancer {
  private index = 0;
  constructor(private readonly targets: readonly CompiledTarget[]) {}
  next(): CompiledTarget {
    const target = this.targets[this.index]!;
    this.index = (this.index + 1) % this.targets.length;
    return target;
  }
}

/**
 * Smooth weighted round robin (nginx): each pick adds every weight to its running score, takes
 * the highest score and subtracts the total from it. Weights 3:1 give a a b a, never a a a b,
 * so load is spread evenly over every window of `total` picks.
 */
class SmoothWeighted implements Balancer {
  // A zero or missing weight is treated as 1 so every defined target stays reachable.
  private readonly weights: number[];
  private readonly total: number;
  private readonly scores: number[];
  constructor(private readonly targets: readonly CompiledTarget[]) {
    this.weights = targets.map((t) => (Number.isInteger(t.weight) && t.weight > 0 ? t.weight : 1));
    this.total = this.weights.reduce((sum, w) => sum + w, 0);
    this.scores = this.weights.map(() => 0);
  }
  next(): CompiledTarget {
    const { scores, weights } = this;
    let best = 0;
    for (let i = 0; i < scores.length; i++) {
      scores[i]! += weights[i]!;
      if (scores[i]! > scores[best]!) best = i;
    }
    scores[best]! -= this.total;
    return this.targets[best]!;
  }
}

/** What the balancer reads of a health-checked target (data-plane/src/health). */
export interface TargetHealthView {
  readonly healthy: boolean;
}

/**
 * Skips unhealthy targets: asks the rotation for up to one full turn of targets and takes the first
 * healthy one, so the healthy ones share the load as the rotation would share it among them. With none
 * healthy it returns the rotation's next anyway (fail open): a wrong health path, or probes that cannot
 * get through, must not turn every request into a 503, and a failed try costs no more than a refusal.
 */
class HealthAware implements Balancer {
  private readonly health: Map<CompiledTarget, TargetHealthView>;
  constructor(
    private readonly inner: Balancer,
    targets: readonly CompiledTarget[],
    health: readonly TargetHealthView[],
  ) {
    this.health = new Map(targets.map((t, i) => [t, health[i]!]));
  }
  next(): CompiledTarget {
    for (let i = 0; i < this.health.size; i++) {
      const target = this.inner.next();
      if (this.health.get(target)!.healthy) return target;
    }
    return this.inner.next();
  }
}

/** `health`: for health-checked routes, each target's health (in the order of `targets`). */
export function createBalancer(balancing: Balancing, targets: readonly CompiledTarget[], health?: readonly TargetHealthView[] | null): Balancer {
  if (targets.length === 0) throw new Error('a route needs at least one target');
  const rotation = targets.length === 1 ? new Single(targets[0]!) : balancing === 'weight' ? new SmoothWeighted(targets) : new RoundRobin(targets);
  return health ? new HealthAware(rotation, targets, health) : rotation;
}
