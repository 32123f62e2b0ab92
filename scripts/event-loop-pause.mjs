// The longest pause of the event loop while `run()` settles and for 100 ms after it (what the holder does right after
// a swap pauses too): the longest gap between the callbacks of a 1 ms interval timer. Used by the bench's in-process
// apply measurements (bench-full-apply.mjs, bench-large-delta.mjs). Not part of the product.
export async function withLongestPause(run) {
  let last = performance.now();
  let pause = 0;
  const ticker = setInterval(() => {
    const now = performance.now();
    pause = Math.max(pause, now - last);
    last = now;
  }, 1);
  try {
    const started = performance.now();
    const result = await run();
    const wall = performance.now() - started;
    await new Promise((r) => setTimeout(r, 100));
    pause = Math.max(pause, performance.now() - last);
    return { result, wall, pause };
  } finally {
    clearInterval(ticker);
  }
}
