// What a data plane allocates to apply a full snapshot of N APIs (docs/benchmarks.md, data plane memory).
// Not part of the product. Counted with V8's sampling heap profiler, collected objects included, so garbage
// counts too: unlike wall or CPU time on a shared machine, the total moves by about 1 % between runs, so
// it can tell a change of a few percent. The snapshot is encoded as the CP sends it and applied as the DP's
// stream client does (lazy definition decoding, a snapshot holder); prints MB allocated in all, then the
// functions that allocate most themselves and, with their callees, inclusively.
//   npm run build && node --max-semi-space-size=8 scripts/sync-allocations.mjs [N=50000] [TOP=25]
import { Session } from 'node:inspector/promises';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { rawApi } from './bench-apis.mjs';

const root = resolve(import.meta.dirname, '..');
const load = (path) => import(pathToFileURL(join(root, path)).href);
const [size = 50000, top = 25] = process.argv.slice(2).map(Number);

const { parseApiDefinition } = await load('proto/dist/definition/index.js');
const { keepDefinitionHashes, toSnapshotMessage } = await load('proto/dist/snapshot/codec.js');
const { loadGatehouseProto } = await load('proto/dist/grpc.js');
const { createSnapshotHolder } = await load('data-plane/dist/sync/snapshot-holder.js');
const { createTokenStore } = await load('data-plane/dist/auth/index.js');

// The CP's side, in its own scope so that none of it is reachable while the DP's side is counted.
const bytes = (() => {
  const cp = loadGatehouseProto();
  const defs = { apis: Array.from({ length: size }, (_, i) => parseApiDefinition(rawApi(i))), oauthServers: [] };
  return cp.wrapPush('bench', cp.encodeSnapshot(toSnapshotMessage(1, defs)));
})();
const dp = loadGatehouseProto({ lazyDefinitions: true });
keepDefinitionHashes(false); // as data-plane/src/main.ts
const holder = createSnapshotHolder({ tokenStore: createTokenStore({}) });

const session = new Session();
session.connect();
await session.post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
const result = holder.apply(dp.Client.service.StreamSnapshots.responseDeserialize(bytes).snapshot);
const { profile } = await session.post('HeapProfiler.stopSampling');
if (!result.ok) throw new Error(`snapshot rejected: ${result.error}`);

const own = new Map();
const inclusive = new Map();
let total = 0;
const name = ({ functionName, url, lineNumber }) =>
  `${functionName || '(anonymous)'} ${url.replace(/^.*\/node_modules\//, '').replace(`file://${root}/`, '')}:${lineNumber}`;
(function walk(node, chain) {
  const path = [...chain, name(node.callFrame)];
  if (node.selfSize > 0) {
    total += node.selfSize;
    own.set(path.at(-1), (own.get(path.at(-1)) ?? 0) + node.selfSize);
    for (const fn of new Set(path)) inclusive.set(fn, (inclusive.get(fn) ?? 0) + node.selfSize);
  }
  for (const child of node.children) walk(child, path);
})(profile.head, []);

const mb = (bytes) => (bytes / 1e6).toFixed(1).padStart(8);
const list = (map) =>
  [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .forEach(([fn, bytes]) => {
      console.log(`${mb(bytes)}  ${fn}`);
    });
console.log(`applying a full snapshot of ${size} APIs allocated ${(total / 1e6).toFixed(0)} MB (sampled; ${(total / size / 1024).toFixed(1)} KiB an API)`);
console.log('\nMB allocated by the function itself');
list(own);
console.log('\nMB allocated with its callees');
list(inclusive);
process.exit(0);
