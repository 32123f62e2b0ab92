/**
 * The part of a table's build that grows with the whole configuration (the index, its routes, the routing table),
 * cut into turns so that a data plane serving requests can let them run between (the snapshot holder's applyInTurns
 * and applyDeltaInTurns); build() takes the result and does the rest at once.
 */
import type { CompiledRoute } from '#proto/compile/index';
import { applyChangesInTurns, indexConfigInTurns, type indexRoutes, indexRoutesInTurns, type ConfigIndex } from '#proto/compile/incremental';
import type { ApiDefinition } from '#proto/definition/types';
import type { ContentChange, SnapshotContent } from '#proto/snapshot/codec';
import { buildRoutingTableInTurns, type RoutingTable } from '../routing/index.js';
import type { TableBasis } from './build.js';

/** What prepareInTurns builds for build(): the index, its routes and their routing table. */
export interface Prepared {
  index: ConfigIndex;
  routed: ReturnType<typeof indexRoutes>;
  routing: RoutingTable;
  /** A delta's changed routes (changedRoutesInTurns); absent for a full snapshot. */
  moved?: ChangedRoutes;
}

export interface ChangedRoutes {
  removed: CompiledRoute[];
  added: CompiledRoute[];
}

/**
 * What the changed definitions route (as indexRoutes counts them) in the index before and after `changes`, yielding
 * after every `turn` changes (each change makes a key and looks it up in each index).
 */
export function* changedRoutesInTurns(
  before: ConfigIndex,
  after: ConfigIndex,
  changes: readonly ContentChange[],
  turn = Infinity,
): Generator<void, ChangedRoutes> {
  const routesOf = (config: ConfigIndex, key: string): readonly CompiledRoute[] => {
    const entry = config.entries.get(key);
    if (entry?.kind === 'api') return (entry.def as ApiDefinition).active ? entry.built.routes : [];
    return entry?.built.server?.routes ?? [];
  };
  const moved: ChangedRoutes = { removed: [], added: [] };
  for (let i = 0; i < changes.length; i++) {
    if (i > 0 && i % turn === 0) yield;
    const key = `${changes[i]!.kind}:${changes[i]!.name}`;
    moved.removed.push(...routesOf(before, key));
    moved.added.push(...routesOf(after, key));
  }
  return moved;
}

/**
 * The index of `content` (a delta's: `previous`'s with its changes made, so its unchanged definitions keep their
 * compiled routes), its changed routes, route list and routing table, yielding after every `turn` definitions.
 */
export function* prepareInTurns(
  content: SnapshotContent & { changes?: ContentChange[] },
  previous: TableBasis | null,
  turn: number,
): Generator<void, Prepared> {
  const delta = previous && content.changes ? { previous, changes: content.changes } : null;
  const index = yield* delta ? applyChangesInTurns(delta.previous.index, delta.changes, undefined, turn) : indexConfigInTurns(content.defs, turn);
  const moved = delta ? yield* changedRoutesInTurns(delta.previous.index, index, delta.changes, turn) : undefined;
  const routed = yield* indexRoutesInTurns(index, turn);
  const routing = yield* buildRoutingTableInTurns(routed.routes, turn);
  return { index, routed, routing, moved };
}
