/**
 * Target selection for one route. A balancer is created per route when a snapshot is applied
 * and lives as long as that snapshot: its rotation state is per data plane, per route.
 */
import type { CompiledTarget } from '#proto/compile/index';
import type { Balancing } from '#proto/definition/types';

export interface Balancer {
  /**
   * The target of an attempt. `key`: what a hash balancer hashes (null or absent: none, round robin instead);
   * `previous`: the target a retry moves on from, which least_conn and hash avoid while another will do (the
   * rotations move on by themselves).
   */
  next(key?: string | null, previous?: CompiledTarget): CompiledTarget;
  /** least_conn's in-flight count of `target`; null for every other balancer (nothing to count). */
  loadOf(target: CompiledTarget): TargetLoad | null;
}

/**
 * Attempts in flight to one target of a least_conn route, in this process: forward.ts counts an HTTP
 * attempt from its dispatch to its end (undici ends every dispatched request once, however it ends),
 * upgrade-request.ts a WebSocket from its handshake until its connections close.
 */
export class TargetLoad {
  inFlight = 0;
}

// Classes rather than closures: a balancer exists per route, and a class instance is a fraction of the
// size of a closure with its context and wrapper object.

/** The only target, every time. */
class Single implements Balancer {
  constructor(private readonly target: CompiledTarget) {}
  next(): CompiledTarget {
    return this.target;
  }
  loadOf(): null {
    return null;
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
  loadOf(): null {
    return null;
  }
}

/** A zero or missing weight is treated as 1 so every defined target stays reachable. */
const weightsOf = (targets: readonly CompiledTarget[]): number[] => targets.map((t) => (Number.isInteger(t.weight) && t.weight > 0 ? t.weight : 1));

/**
 * Whether target `i` may be picked in `round` of a pick avoiding `skip` (a retry's previous target; -1: none):
 * 0 healthy and not `skip`, 1 healthy, 2 not `skip`, 3 any (fail open, as the rotations).
 */
function eligible(health: readonly TargetHealthView[] | null, i: number, skip: number, round: number): boolean {
  return (round > 1 || health === null || health[i]!.healthy) && (round % 2 === 1 || i !== skip);
}

/**
 * Smooth weighted round robin (nginx): each pick adds every weight to its running score, takes
 * the highest score and subtracts the total from it. Weights 3:1 give a a b a, never a a a b,
 * so load is spread evenly over every window of `total` picks. As nginx, a pick leaves unhealthy
 * targets out of the round (their scores stay, the total is the healthy ones'): skipping them after
 * the pick instead would let a heavy dead target take most picks.
 */
class SmoothWeighted implements Balancer {
  protected readonly weights: number[];
  private readonly scores: number[];
  constructor(
    protected readonly targets: readonly CompiledTarget[],
    protected readonly health: readonly TargetHealthView[] | null,
  ) {
    this.weights = weightsOf(targets);
    this.scores = this.weights.map(() => 0);
  }
  next(_key?: string | null, _previous?: CompiledTarget): CompiledTarget {
    return this.targets[this.pick(this.health) ?? this.pick(null)!]!;
  }
  loadOf(_target: CompiledTarget): TargetLoad | null {
    return null;
  }
  /** The index picked among the healthy targets (all when `health` is null) that `only` marks (all when null); null when none is. */
  protected pick(health: readonly TargetHealthView[] | null, only: Uint8Array | null = null): number | null {
    const { scores, weights } = this;
    let best = -1;
    let total = 0;
    for (let i = 0; i < scores.length; i++) {
      if ((health && !health[i]!.healthy) || (only && only[i] === 0)) continue;
      scores[i]! += weights[i]!;
      total += weights[i]!;
      if (best < 0 || scores[i]! > scores[best]!) best = i;
    }
    if (best < 0) return null;
    scores[best]! -= total;
    return best;
  }
}

/**
 * least_conn (nginx's): the target with the fewest attempts in flight per unit of weight (in this process),
 * ties shared by smooth weighted round robin among the tied targets, as nginx does: equal targets take turns,
 * and under light load (every count 0) weights 3:1 still give 3:1.
 */
class LeastConn extends SmoothWeighted {
  private readonly loads = this.targets.map(() => new TargetLoad());
  /** The targets tied for the lowest load in the pick under way (reused: no allocation per pick). */
  private readonly tied = new Uint8Array(this.targets.length);
  override next(_key?: string | null, previous?: CompiledTarget): CompiledTarget {
    const { targets, health, loads, weights, tied } = this;
    const skip = previous === undefined ? -1 : targets.indexOf(previous);
    // Round 3 takes any target: there is always one.
    for (let round = 0; ; round++) {
      // a/wa < b/wb as a·wb < b·wa: exact in integers.
      let best = -1;
      for (let i = 0; i < targets.length; i++) {
        tied[i] = eligible(health, i, skip, round) ? 1 : 0;
        if (tied[i] && (best < 0 || loads[i]!.inFlight * weights[best]! < loads[best]!.inFlight * weights[i]!)) best = i;
      }
      if (best < 0) continue;
      for (let i = 0; i < targets.length; i++) if (tied[i] && loads[i]!.inFlight * weights[best]! !== loads[best]!.inFlight * weights[i]!) tied[i] = 0;
      return targets[this.pick(null, tied)!]!;
    }
  }
  override loadOf(target: CompiledTarget): TargetLoad | null {
    return this.loads[this.targets.indexOf(target)] ?? null;
  }
}

/** FNV-1a over the UTF-16 code units, then murmur3's finaliser: FNV alone barely moves the high bits for a last character. */
function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return mix32(h);
}

/** murmur3's fmix32: every input bit moves about half the output bits. */
function mix32(h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * hash: rendezvous (highest random weight) hashing. Every target scores the key, the highest score among the
 * healthy targets wins. Chosen over a ring or Maglev because it is the simplest to get right and holds no
 * table: a pick costs one hash of the key and one mix and log per target (fine for the few targets a route
 * has; see the bench's balancer rows), and consistency is by construction: a target leaving the set (removed,
 * or unhealthy) moves only the keys it won, each to its next-best target, and those come back when it returns.
 * Weighted as Schindelhauer and Schomaker's logarithmic method: score = weight / -ln(u), u the key's uniform
 * draw for that target, so a target wins keys in proportion to its weight. A target's draw is seeded by its
 * URL (not its position): the order of the targets does not matter, removing one leaves the others' scores
 * as they were, and every data plane computes the same picks. No key: smooth weighted round robin.
 */
class Rendezvous extends SmoothWeighted {
  private readonly seeds: number[];
  constructor(targets: readonly CompiledTarget[], health: readonly TargetHealthView[] | null) {
    super(targets, health);
    // A URL listed twice is told apart by its occurrence, or the two would always tie.
    const seen = new Map<string, number>();
    this.seeds = targets.map((t) => {
      const n = seen.get(t.template) ?? 0;
      seen.set(t.template, n + 1);
      return hash32(n === 0 ? t.template : `${t.template}#${n}`);
    });
  }
  override next(key?: string | null, previous?: CompiledTarget): CompiledTarget {
    if (key == null || key === '') return super.next();
    const { targets, health, seeds, weights } = this;
    const k = hash32(key);
    const skip = previous === undefined ? -1 : targets.indexOf(previous);
    for (let round = 0; ; round++) {
      let best = -1;
      let bestScore = 0;
      for (let i = 0; i < targets.length; i++) {
        if (!eligible(health, i, skip, round)) continue;
        // u in (0, 1): -ln(u) > 0.
        const score = weights[i]! / -Math.log((mix32(k ^ seeds[i]!) + 0.5) / 4294967296);
        if (best < 0 || score > bestScore) {
          best = i;
          bestScore = score;
        }
      }
      if (best >= 0) return targets[best]!;
    }
  }
}

/** `health`: for health-checked routes, each target's health (in the order of `targets`). */
export function createBalancer(balancing: Balancing, targets: readonly CompiledTarget[], health?: readonly TargetHealthView[] | null): Balancer {
  if (targets.length === 0) throw new Error('a route needs at least one target');
  if (targets.length === 1) return new Single(targets[0]!);
  const checks = health ?? null;
  switch (balancing) {
    case 'weight':
      return new SmoothWeighted(targets, checks);
    case 'least_conn':
      return new LeastConn(targets, checks);
    case 'hash':
      return new Rendezvous(targets, checks);
    default:
      return new RoundRobin(targets, checks);
  }
}
