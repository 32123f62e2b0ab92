/**
 * The cb plugin's state: one CircuitBreaker per API, upstream target and cb config, kept by a
 * BreakerRegistry across snapshots (the snapshot holder makes one per data plane).
 *
 * closed → open: once the rolling window (10 buckets of 1 s) holds `requestVolumeThreshold`
 * results of which at least `errorPercentThreshold` % are errors, or after `consecutiveFailures`
 * errors in a row. open → half-open: `sleepWindowMs` later, the next request is let through as
 * the one probe (others are refused while it runs). half-open → closed on the probe's success
 * (counts reset), → open again (a new sleep window) on its failure. The clock is passed in.
 */
import { Gauge, type Registry } from 'prom-client';
import type { CompiledCb } from '#proto/plugins/index';
import { RouteStateRegistry } from '../route-state.js';

export type BreakerState = 'closed' | 'open' | 'half-open';

/** What `admit` answers: refused (open, or the probe is out), refused (max concurrency), or go (plain, probe). */
export const REFUSED_OPEN = 0;
export const REFUSED_BUSY = 1;
export const ADMITTED = 2;
export const ADMITTED_PROBE = 3;
export type Admission = typeof REFUSED_OPEN | typeof REFUSED_BUSY | typeof ADMITTED | typeof ADMITTED_PROBE;

const BUCKETS = 10;
const BUCKET_MS = 1_000;

export type BreakerSettings = Pick<CompiledCb, 'maxConcurrent' | 'errorPercentThreshold' | 'requestVolumeThreshold' | 'sleepWindowMs' | 'consecutiveFailures'>;

export class CircuitBreaker {
  private state: BreakerState = 'closed';
  private openedAt = 0;
  private probing = false;
  private consecutive = 0;
  private inFlight = 0;
  /** Rolling window: per bucket, the bucket's number (time / BUCKET_MS), results and errors. */
  private readonly slot = new Float64Array(BUCKETS).fill(-1);
  private readonly total = new Uint32Array(BUCKETS);
  private readonly errors = new Uint32Array(BUCKETS);

  constructor(
    private readonly settings: BreakerSettings,
    private readonly now: () => number,
  ) {}

  /** The state now (an open breaker past its sleep window shows as half-open). */
  current(): BreakerState {
    if (this.state === 'open' && this.now() - this.openedAt >= this.settings.sleepWindowMs) return 'half-open';
    return this.state;
  }

  /** May one more request go upstream? Every admitted one must be `record`ed exactly once. */
  admit(): Admission {
    if (this.state === 'open') {
      if (this.now() - this.openedAt < this.settings.sleepWindowMs) return REFUSED_OPEN;
      this.state = 'half-open';
      this.probing = false;
    }
    if (this.state === 'half-open') {
      if (this.probing) return REFUSED_OPEN;
      this.probing = true;
      this.inFlight++;
      return ADMITTED_PROBE;
    }
    if (this.settings.maxConcurrent > 0 && this.inFlight >= this.settings.maxConcurrent) return REFUSED_BUSY;
    this.inFlight++;
    return ADMITTED;
  }

  /** The result of an admitted request. Results of requests admitted before a trip are ignored. */
  record(admission: Admission, failed: boolean): void {
    if (admission !== ADMITTED && admission !== ADMITTED_PROBE) return;
    this.inFlight--;
    const now = this.now();
    if (admission === ADMITTED_PROBE) {
      this.probing = false;
      if (failed) this.trip(now);
      else this.close();
      return;
    }
    if (this.state !== 'closed') return;
    this.consecutive = failed ? this.consecutive + 1 : 0;
    const { total, errors } = this.add(now, failed);
    const s = this.settings;
    if (
      (s.consecutiveFailures > 0 && this.consecutive >= s.consecutiveFailures) ||
      (total >= s.requestVolumeThreshold && errors * 100 >= s.errorPercentThreshold * total)
    ) {
      this.trip(now);
    }
  }

  private trip(now: number): void {
    this.state = 'open';
    this.openedAt = now;
    this.reset();
  }

  private close(): void {
    this.state = 'closed';
    this.reset();
  }

  private reset(): void {
    this.consecutive = 0;
    this.slot.fill(-1);
  }

  /** Adds a result to the window; returns the window's sums. */
  private add(now: number, failed: boolean): { total: number; errors: number } {
    const bucket = Math.floor(now / BUCKET_MS);
    const i = bucket % BUCKETS;
    if (this.slot[i] !== bucket) {
      this.slot[i] = bucket;
      this.total[i] = 0;
      this.errors[i] = 0;
    }
    this.total[i]!++;
    if (failed) this.errors[i]!++;
    let total = 0;
    let errors = 0;
    for (let j = 0; j < BUCKETS; j++) {
      if (this.slot[j]! > bucket - BUCKETS) {
        total += this.total[j]!;
        errors += this.errors[j]!;
      }
    }
    return { total, errors };
  }
}

/** Breakers of one snapshot being built (route-state.ts); `commit` (after the swap) drops those no route uses any more. */
export interface BreakerGeneration {
  /** The breaker of this route, target and config: the previous snapshot's when all three are unchanged. */
  get(route: string, target: string, settings: BreakerSettings & { key: string }): CircuitBreaker;
  release(route: string): void;
  releaseAll(): void;
  commit(): void;
}

export interface BreakerRegistry {
  begin(): BreakerGeneration;
}

const STATE_VALUE: Record<BreakerState, number> = { closed: 0, 'half-open': 1, open: 2 };

/** `registry`: where the state gauge is registered; `now`: milliseconds (tests pass a fake clock). */
export function createBreakerRegistry(deps: { registry?: Registry; now?: () => number } = {}): BreakerRegistry {
  const now = deps.now ?? Date.now;
  const breakers = new RouteStateRegistry<CircuitBreaker>();
  if (deps.registry) {
    new Gauge({
      name: 'gatehouse_circuit_breaker_state',
      help: 'State of each cb circuit breaker by route and upstream target: 0 closed, 1 half-open, 2 open.',
      labelNames: ['route', 'target'],
      registers: [deps.registry],
      collect() {
        this.reset();
        for (const [breaker, route, target] of breakers.uses()) this.set({ route, target }, STATE_VALUE[breaker.current()]);
      },
    });
  }
  return {
    begin() {
      const generation = breakers.begin();
      return {
        get: (route, target, settings) => generation.get(`${route}\n${target}\n${settings.key}`, route, target, () => new CircuitBreaker(settings, now)),
        release: (route) => generation.release(route),
        releaseAll: () => generation.releaseAll(),
        commit: () => generation.commit(),
      };
    },
  };
}
