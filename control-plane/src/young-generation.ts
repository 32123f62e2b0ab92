/**
 * Keeps V8's young generation at the size module loading left it while the control plane starts (as the
 * data plane's hold, data-plane/src/memory/young-generation.ts). V8 doubles the young generation whenever
 * more bytes survived its scavenges than it holds: what a start allocates (every definition, the Kubernetes
 * store's caches, the first snapshot) all survives, so a start with 10,000 APIs grew it to its maximum, and
 * its pages stayed committed. Held, the definitions are promoted sooner. Released once the first snapshot is
 * built: after that most of what the control plane allocates (status writes, watch events) dies young, and
 * a young generation held small would promote it. Set at run time on purpose: V8 raises a command-line
 * `--semi-space-growth-factor` below 2 to 2. main.ts imports this module first.
 */
import { setFlagsFromString } from 'node:v8';

setFlagsFromString('--semi-space-growth-factor=1');

/**
 * The old generation is collected once it has grown 20 % past what the last full collection kept, not
 * V8's default of up to 100 % or more: the churn of status writes and watch events (every CR replaced in
 * the informer's cache, promoted garbage) otherwise grew the heap to twice its live size before the first
 * full collection, and the RSS kept those pages. Measured with 10,000 CRs as `npm run bench:kubernetes`
 * runs it: a few more full collections, no CPU difference seen. A `--heap-growing-percent` on the command
 * line wins.
 */
if (!process.execArgv.some((arg) => arg.startsWith('--heap-growing-percent'))) setFlagsFromString('--heap-growing-percent=20');

/** Ends the start-up hold: V8's default factor (2) from now on. */
export function endStartUpHold(): void {
  setFlagsFromString('--semi-space-growth-factor=2');
}
