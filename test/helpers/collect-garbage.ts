import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * A full collection, for tests that check what a piece of code keeps alive. Node has no API for one:
 * V8's `gc` is exposed at run time and read in a context of its own (data-plane/src/memory/idle-trim.ts).
 * A WeakRef's target lives at least to the end of the job that made or read it, so await a macrotask first.
 */
export async function collectGarbage(): Promise<void> {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  // Twice, each after a macrotask: what the first collection's clean-up (a finalizer, a callback queued meanwhile) lets go
  // of is collected by the second. One round can leave a replaced route's state alive (table/build.test.ts
  // saw it in a few CI runs); the cause is not known.
  for (let round = 0; round < 2; round++) {
    await new Promise((resolve) => setImmediate(resolve));
    gc();
  }
}
