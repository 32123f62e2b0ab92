// How long a data plane that holds N APIs pauses its event loop (its requests) to apply a full snapshot of N APIs
// with one changed, at once (holder.apply) and in turns (holder.applyInTurns), in-process (docs/operations.md "Propagation";
// `npm run bench`'s `full snapshot` section runs it at 10,000 and 50,000). The holder and codec are the DP's own
// (tsc's files); the snapshots are encoded as the CP encodes them and decoded as the DP's stream does; the pause is
// the longest gap between the callbacks of a 1 ms interval timer while the apply runs and for 100 ms after it.
//   npm run build && node --max-semi-space-size=8 scripts/bench-full-apply.mjs [N=10000] [ROUNDS=5]
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { rawApi } from './bench-apis.mjs';
import { withLongestPause } from './event-loop-pause.mjs';

const root = resolve(import.meta.dirname, '..');
const load = (path) => import(pathToFileURL(join(root, path)).href);
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) / 2)];

/** Per way ('at once', 'in turns'): each round's longest pause and wall time in ms, and their medians. */
export async function measureFullApply(size, rounds) {
  const { parseApiDefinition } = await load('proto/dist/definition/index.js');
  const { toSnapshotMessage, keepDefinitionHashes } = await load('proto/dist/snapshot/codec.js');
  const { loadGatehouseProto } = await load('proto/dist/grpc.js');
  const { createSnapshotHolder } = await load('data-plane/dist/sync/snapshot-holder.js');
  const { createTableBuilder } = await load('data-plane/dist/table/index.js');
  const { createTokenStore } = await load('data-plane/dist/auth/index.js');

  const cp = loadGatehouseProto();
  const dp = loadGatehouseProto({ lazyDefinitions: true });
  // Version v: API 0's target port is 1000 + v, so every version differs from the one before by one API.
  const api = (i, version) => {
    const raw = rawApi(i);
    if (i === 0) raw.proxy.upstreams = { ...raw.proxy.upstreams, targets: [{ target: `http://127.0.0.1:${1000 + version}` }] };
    return parseApiDefinition(raw);
  };
  const push = (version) =>
    cp.wrapPush('bench', cp.encodeSnapshot(toSnapshotMessage(version, { apis: Array.from({ length: size }, (_, i) => api(i, version)), oauthServers: [] })));
  keepDefinitionHashes(false); // as data-plane/src/main.ts

  const holder = createSnapshotHolder({ tables: createTableBuilder({ tokenStore: createTokenStore({}) }) });
  const runs = { 'at once': [], 'in turns': [] };
  let version = 0;
  const apply = async (how) => {
    const message = dp.Client.service.StreamSnapshots.responseDeserialize(push(++version)).snapshot;
    const { result, wall, pause } = await withLongestPause(() => (how === 'in turns' ? holder.applyInTurns(message) : holder.apply(message)));
    if (!result?.ok) throw new Error(result?.error ?? 'not applied');
    return { wall, pause };
  };
  try {
    await apply('at once'); // the first snapshot (and the JIT's warm-up)
    for (let r = 0; r < rounds; r++) {
      // Alternated, the order flipped each round, so that drift hits both alike.
      for (const how of r % 2 === 0 ? ['at once', 'in turns'] : ['in turns', 'at once']) runs[how].push(await apply(how));
    }
  } finally {
    keepDefinitionHashes(true); // the codec's default, for whoever uses it next in this process (the bench's other sections)
  }
  return Object.fromEntries(
    Object.entries(runs).map(([how, list]) => [how, { runs: list, pause: median(list.map((r) => r.pause)), wall: median(list.map((r) => r.wall)) }]),
  );
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const size = Number(process.argv[2] ?? 10000);
  const rounds = Number(process.argv[3] ?? 5);
  for (const [how, { runs, pause, wall }] of Object.entries(await measureFullApply(size, rounds))) {
    const list = (key) => runs.map((run) => run[key].toFixed(0)).join(' ');
    console.log(
      `${how.padEnd(8)} ${size} APIs: longest pause ${pause.toFixed(1)} ms (median of ${rounds}: ${list('pause')}), apply ${wall.toFixed(1)} ms wall (${list('wall')})`,
    );
  }
  process.exit(0);
}
