// Preloaded by scripts/alloc-per-request.sh into the measured process (`node --import`): V8's sampling
// heap profiler, collected objects included, so a request's garbage is counted as well as what lives
// on. It starts when the file named by ALLOC_START appears (the script creates it after the warm-up),
// stops when ALLOC_STOP appears, and writes the profile to ALLOC_OUT. Not part of the product.
import { existsSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

const { ALLOC_START, ALLOC_STOP, ALLOC_OUT, ALLOC_INTERVAL = '256' } = process.env;
const session = new Session();
session.connect();
const poll = (file, then) => {
  const timer = setInterval(() => {
    if (!existsSync(file)) return;
    clearInterval(timer);
    then();
  }, 50);
  timer.unref();
};
poll(ALLOC_START, async () => {
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: Number(ALLOC_INTERVAL),
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  writeFileSync(`${ALLOC_OUT}.sampling`, '');
  poll(ALLOC_STOP, async () => {
    const { profile } = await session.post('HeapProfiler.stopSampling');
    writeFileSync(ALLOC_OUT, JSON.stringify(profile));
  });
});
