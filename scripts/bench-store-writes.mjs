// CP cost of one admin write in the file store, in process: store.update() (what the DPs wait for) plus
// the config-history record (what the admin response waits for), as recorded-update.ts runs them.
// A store of N APIs; each write replaces one API (preserve_host flipped) through the admin API's own
// write function, like the bench's propagation section. Prints ms per write (median, p99) and CPU ms per write (user + system of this process).
//   node scripts/bench-store-writes.mjs            (sizes: STORE_BENCH_SIZES=1000,10000,50000)
//   STORE_BENCH_ROOT=/path/to/other/checkout node scripts/bench-store-writes.mjs   (that tree's dist)
//   STORE_BENCH_WRITES=3000: that many measured writes at every size (the config history's journal grows by one line a write)
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const root = resolve(process.env.STORE_BENCH_ROOT ?? '.');
const load = (path) => import(pathToFileURL(join(root, path)).href);
const { openFileStore } = await load('control-plane/dist/store/file-store.js');
const { openFileHistory } = await load('control-plane/dist/store/config-history.js');
const { definitionsHash } = await load('proto/dist/snapshot/codec.js');
const { createLogger } = await load('proto/dist/logger.js');
const { apiKind, indexForWrites, updateDefinition } = await load('control-plane/dist/admin/definition-writes.js');

const logger = createLogger('control-plane', 'silent');
const sizes = (process.env.STORE_BENCH_SIZES ?? '1000,10000,50000').split(',').map(Number);
const rawApi = (i) => ({
  name: `api-${i}`,
  hosts: [`h${i % 97}.example`],
  proxy: {
    listen_path: `/svc-${i}/v1/*`,
    strip_path: true,
    upstreams: { balancing: 'roundrobin', targets: [{ target: `http://10.0.${(i >> 8) & 255}.${i & 255}:8080` }] },
  },
});
const pct = (values, p) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil((p / 100) * values.length) - 1)];

console.log(`store write cost, ${root}`);
console.log(
  `${'APIs'.padStart(8)}${'writes'.padStart(8)}${'ms med'.padStart(9)}${'ms p99'.padStart(9)}${'CPU ms/w'.padStart(10)}${'store med'.padStart(11)}${'store p99'.padStart(11)}`,
);
for (const size of sizes) {
  const dataDir = await mkdtemp(join(tmpdir(), 'gatehouse-store-bench-'));
  try {
    const apis = Array.from({ length: size }, (_, i) => rawApi(i));
    await writeFile(join(dataDir, 'store.json'), JSON.stringify({ revision: 1, apis, oauth_servers: [] }), { mode: 0o600 });
    const store = await openFileStore({ dataDir, logger });
    const history = await openFileHistory({ dataDir, logger, limit: 20 });
    await history.seed(store.current());
    indexForWrites(store.current().defs); // as main.ts does before it listens
    let flip = 0;
    const write = async () => {
      const started = performance.now();
      let written;
      // As PUT /apis/api-7 makes it (the index check, the derived hash and changes).
      const result = await store.update((defs) => (written = updateDefinition(apiKind, defs, 'api-7', { proxy: { preserve_host: flip++ % 2 === 0 } }).defs));
      const stored = performance.now();
      await history.record({ revision: result.revision, defs: written, hash: definitionsHash(written) }, { author: 'bench', action: 'PUT /apis/api-7' });
      return { total: performance.now() - started, store: stored - started };
    };
    for (let i = 0; i < 5; i++) await write(); // warm-up
    const writes = Number(process.env.STORE_BENCH_WRITES ?? (size >= 50_000 ? 40 : size >= 10_000 ? 100 : 200));
    const cpu = process.cpuUsage();
    const runs = [];
    for (let i = 0; i < writes; i++) runs.push(await write());
    const used = process.cpuUsage(cpu);
    const total = runs.map((r) => r.total);
    const storeMs = runs.map((r) => r.store);
    console.log(
      `${String(size).padStart(8)}${String(writes).padStart(8)}${pct(total, 50).toFixed(1).padStart(9)}${pct(total, 99).toFixed(1).padStart(9)}${((used.user + used.system) / 1000 / writes).toFixed(2).padStart(10)}${pct(storeMs, 50).toFixed(1).padStart(11)}${pct(storeMs, 99).toFixed(1).padStart(11)}`,
    );
    await store.close();
    await history.close();
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}
console.log('ms: store.update + history.record per write (store: store.update alone, what the DPs wait for); CPU: this process, user + system.');
