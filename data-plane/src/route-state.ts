/**
 * State that outlives snapshots (cb's circuit breakers, upstream health checks): values by key, each
 * with the routes (and their targets) that use it. Building a snapshot opens a generation: `get` hands
 * out the committed value of a key (or a new one); `release(route)` and `releaseAll()` give up what
 * routes held; `commit`, after the swap, keeps every value some route still uses and drops the rest.
 * A route that gets anything in a generation gives up what it held before, so a rebuilt route holds
 * exactly what it got. A full snapshot releases all; a delta releases its removed routes and gets its
 * added ones, so untouched routes keep theirs at no cost: a delta's cost does not grow with the cb or
 * health-checked routes it leaves alone.
 */
export class RouteStateRegistry<V> {
  private readonly entries = new Map<string, { value: V; users: Map<string, Set<string>> }>();
  private readonly byRoute = new Map<string, Set<string>>();

  constructor(private readonly hooks: { added?(value: V): void; dropped?(value: V): void } = {}) {}

  /** Each committed value with a route and target that use it. */
  *uses(): Generator<[value: V, route: string, target: string]> {
    for (const { value, users } of this.entries.values()) for (const [route, targets] of users) for (const target of targets) yield [value, route, target];
  }

  begin(): RouteStateGeneration<V> {
    return new RouteStateGeneration(this, (key) => this.entries.get(key)?.value);
  }

  /** Drops every value (shutdown). */
  clear(): void {
    for (const { value } of this.entries.values()) this.hooks.dropped?.(value);
    this.entries.clear();
    this.byRoute.clear();
  }

  /** RouteStateGeneration.commit. */
  apply(all: boolean, released: ReadonlySet<string>, got: ReadonlyMap<string, { value: V; users: Map<string, Set<string>> }>): void {
    const touched = new Set<string>();
    const drop = (route: string) => {
      for (const key of this.byRoute.get(route) ?? []) {
        this.entries.get(key)!.users.delete(route);
        touched.add(key);
      }
      this.byRoute.delete(route);
    };
    if (all) for (const route of [...this.byRoute.keys()]) drop(route);
    for (const route of released) drop(route);
    for (const { users } of got.values()) for (const route of users.keys()) drop(route);
    for (const [key, { value, users }] of got) {
      let entry = this.entries.get(key);
      if (!entry) {
        this.entries.set(key, (entry = { value, users: new Map() }));
        this.hooks.added?.(value);
      }
      for (const [route, targets] of users) {
        entry.users.set(route, targets);
        const keys = this.byRoute.get(route);
        if (keys) keys.add(key);
        else this.byRoute.set(route, new Set([key]));
      }
    }
    for (const key of touched) {
      const entry = this.entries.get(key)!;
      if (entry.users.size > 0) continue;
      this.entries.delete(key);
      this.hooks.dropped?.(entry.value);
    }
  }
}

/** One snapshot's changes to a RouteStateRegistry; nothing happens to it until `commit` (a rejected snapshot never commits). */
export class RouteStateGeneration<V> {
  private all = false;
  private readonly released = new Set<string>();
  private readonly got = new Map<string, { value: V; users: Map<string, Set<string>> }>();

  constructor(
    private readonly registry: RouteStateRegistry<V>,
    private readonly committed: (key: string) => V | undefined,
  ) {}

  /** The value of `key` for `route`'s `target`: the committed one, or one `create` makes. */
  get(key: string, route: string, target: string, create: () => V): V {
    let pending = this.got.get(key);
    if (!pending) this.got.set(key, (pending = { value: this.committed(key) ?? create(), users: new Map() }));
    const targets = pending.users.get(route);
    if (targets) targets.add(target);
    else pending.users.set(route, new Set([target]));
    return pending.value;
  }

  /** `route` no longer holds what it held (removed or changed). */
  release(route: string): void {
    this.released.add(route);
  }

  /** No route holds what it held: a full snapshot. */
  releaseAll(): void {
    this.all = true;
  }

  commit(): void {
    this.registry.apply(this.all, this.released, this.got);
  }
}
