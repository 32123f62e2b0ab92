/**
 * Keeps V8's young generation from growing while the data plane starts and applies a full snapshot
 * (docs/operations.md "Data plane memory"). V8 doubles the young generation whenever more bytes survived its
 * scavenges than it holds; a sync's definitions all survive, so a large sync would grow it to its maximum
 * (2 × 8 MiB at the chart's `--max-semi-space-size=8`, 2 × 16 at node's default), and the pages would stay
 * committed until V8's memory reducer runs, which it does late and not reliably. Held, the sync runs in a
 * small young generation and leaves it there: the definitions are promoted sooner (a cold sync is not slower
 * for it), and once released, request traffic grows it, where its size is what the scavenges per request
 * depend on.
 *
 * The hold sets V8's `--semi-space-growth-factor` to 1 (Grow then keeps the capacity) and back to V8's
 * default of 2. Set at run time on purpose: V8 raises a command-line value below 2 to 2 when it
 * configures the heap. The data plane's own tests check the effect through /metrics
 * (`nodejs_heap_space_size_total_bytes{space="new"}`), so a node release that drops the flag shows there.
 */
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';

/** V8's default `--semi-space-growth-factor` (flag-definitions.h), restored when the last hold ends. */
const V8_GROWTH_FACTOR = 2;

/** Takes a hold; the function it returns ends that hold (once; later calls do nothing). */
export type YoungGenerationHold = () => () => void;

/** The process's holds: the young generation grows again when none is left. */
export function youngGenerationHold(setFlags: (flags: string) => void = setFlagsFromString): YoungGenerationHold {
  let holds = 0;
  return () => {
    if (holds++ === 0) setFlags('--semi-space-growth-factor=1');
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      if (--holds === 0) setFlags(`--semi-space-growth-factor=${V8_GROWTH_FACTOR}`);
    };
  };
}

/** One of V8's heap spaces now (`new_space`, `old_space`…), as /metrics' nodejs_heap_space_size_*_bytes read it. */
export function heapSpace(name: string): { committed: number; used: number } {
  const space = getHeapSpaceStatistics().find((s) => s.space_name === name);
  return { committed: space?.space_size ?? 0, used: space?.space_used_size ?? 0 };
}

/** The young generation's committed bytes now (as nodejs_heap_space_size_total_bytes{space="new"}). */
export const youngGenerationBytes = (): number => heapSpace('new_space').committed;
