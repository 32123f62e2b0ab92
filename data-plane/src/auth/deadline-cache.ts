/**
 * A bounded LRU (lru-cache) whose entries each carry their own deadline on the caller's clock: the
 * auth caches (jwt verifications, introspection verdicts, the in-process token store) keep a value
 * until an absolute instant, such as a token's exp, and it is gone at that instant.
 *
 * lru-cache's own ttl is not used for this: it measures relative ages in whole milliseconds on
 * performance.now(), still serves an entry when its age equals the ttl, and with the default
 * ttlResolution caches the clock for 1 ms of real time, so an injected clock that jumps in a test
 * would be read late. The deadline is compared here instead, once, against the clock the caller passes.
 */
import { LRUCache } from 'lru-cache';

export class DeadlineCache<V extends {}> {
  /**
   * Created by the first `set`: lru-cache allocates its arrays for `max` entries up front, and a data plane holds several of these that most deployments never fill or use.
   * Stays undefined when max ≤ 0: nothing is remembered (lru-cache refuses a zero bound without a ttl).
   */
  #lru: LRUCache<string, { value: V; until: number }> | undefined;
  readonly #max: number;

  constructor(max: number) {
    this.#max = max;
  }

  /** The value while `at` is before its deadline (it becomes the most recently used); an expired entry is dropped. */
  get(key: string, at: number): V | undefined {
    const entry = this.#lru?.get(key);
    if (entry === undefined) return undefined;
    if (entry.until > at) return entry.value;
    this.#lru!.delete(key);
    return undefined;
  }

  /** Remembers `value` until `until`; when full, the least recently used entry goes. */
  set(key: string, value: V, until: number): void {
    if (this.#max <= 0) return;
    (this.#lru ??= new LRUCache({ max: this.#max })).set(key, { value, until });
  }

  delete(key: string): void {
    this.#lru?.delete(key);
  }

  clear(): void {
    this.#lru?.clear();
  }

  /** Entries held, expired ones not yet read included. */
  get size(): number {
    return this.#lru?.size ?? 0;
  }
}
