/**
 * A map that is never modified: `with(changes)` gives a new version and every older one stays as it
 * was (a data plane serves the old snapshot until the new one is swapped in, and a rejected change
 * must leave the held index as it was). A version is a flat Map shared by every version derived from
 * it plus the keys changed since (`overlay`, copied per version; a removal kept as a tombstone). When
 * the overlay outgrows √(flat size) it is folded into a new flat Map: a change then costs
 * O(√n) amortised instead of the O(n) copy of the whole map per push. A lookup costs at most two
 * Map lookups.
 */
const TOMBSTONE: unique symbol = Symbol('removed');

/** Overlays at least this large before folding: below it a fold is as cheap as an overlay copy. */
const MIN_OVERLAY = 64;

export class LayeredMap<K, V extends NonNullable<unknown>> {
  private constructor(
    private readonly base: ReadonlyMap<K, V>,
    private readonly overlay: ReadonlyMap<K, V | typeof TOMBSTONE> | null,
    readonly size: number,
  ) {}

  /** Takes `map` over, not copied: nobody may modify it afterwards. */
  static of<K, V extends NonNullable<unknown>>(map: ReadonlyMap<K, V> = new Map()): LayeredMap<K, V> {
    return new LayeredMap(map, null, map.size);
  }

  get(key: K): V | undefined {
    if (this.overlay) {
      const value = this.overlay.get(key);
      if (value !== undefined) return value === TOMBSTONE ? undefined : value;
    }
    return this.base.get(key);
  }

  has(key: K): boolean {
    return this.get(key) !== undefined;
  }

  /** This map with each `[key, value]` set, or removed when the value is undefined; later pairs win. */
  with(changes: Iterable<readonly [K, V | undefined]>): LayeredMap<K, V> {
    if (this.size === 0) {
      // From nothing (a data plane's full snapshot, a store's first index): straight into one flat Map,
      // not an overlay folded into a copy of it.
      const flat = new Map<K, V>();
      const put = (value: V | undefined, key: K) => (value === undefined ? flat.delete(key) : flat.set(key, value));
      // A Map's forEach, not for…of: no [key, value] array per entry.
      if (changes instanceof Map) changes.forEach(put);
      else for (const [key, value] of changes) put(value, key);
      return new LayeredMap(flat, null, flat.size);
    }
    const overlay = new Map(this.overlay ?? []);
    let size = this.size;
    const present = (key: K) => {
      const value = overlay.get(key);
      return value === undefined ? this.base.has(key) : value !== TOMBSTONE;
    };
    for (const [key, value] of changes) {
      const was = present(key);
      if (value === undefined) {
        if (this.base.has(key)) overlay.set(key, TOMBSTONE);
        else overlay.delete(key);
        if (was) size--;
      } else {
        overlay.set(key, value);
        if (!was) size++;
      }
    }
    if (overlay.size <= Math.max(MIN_OVERLAY, Math.sqrt(this.base.size))) return new LayeredMap(this.base, overlay.size > 0 ? overlay : null, size);
    const flat = new Map(this.base);
    for (const [key, value] of overlay) {
      if (value === TOMBSTONE) flat.delete(key);
      else flat.set(key, value);
    }
    return new LayeredMap(flat, null, size);
  }

  *entries(): IterableIterator<[K, V]> {
    const overlay = this.overlay;
    for (const entry of this.base) if (!overlay?.has(entry[0])) yield entry;
    if (overlay) for (const [key, value] of overlay) if (value !== TOMBSTONE) yield [key, value];
  }

  *keys(): IterableIterator<K> {
    for (const [key] of this.entries()) yield key;
  }

  *values(): IterableIterator<V> {
    for (const [, value] of this.entries()) yield value;
  }

  [Symbol.iterator](): IterableIterator<[K, V]> {
    return this.entries();
  }
}
