// How long a data plane that holds N APIs pauses its event loop (its requests) to apply a large delta in turns
// (holder.applyDeltaInTurns, as the stream client applies a delta of LARGE_DELTA definitions or more), in-process
// (docs/operations.md "Propagation"). Each of ROUNDS deltas changes the first CHANGED APIs (default: all
// N); the pause is the longest gap between the callbacks of a 1 ms interval timer while the apply runs and for 100 ms
// after it. The holder and codec are the DP's own (tsc's files). ROOT picks another built tree to compare with.
//   npm run build && node --max-semi-space-size=8 scripts/bench-large-delta.mjs [N=10000] [CHANGED=N] [ROUNDS=4]
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { rawApi } from './bench-apis.mjs';
import { withLongestPause } from './event-loop-pause.mjs';

const root = resolve(process.env.ROOT ?? join(import.meta.dirname, '..'));
const load = (path) => import(pathToFileURL(join(root, path)).href);
const { parseApiDefinition } = await load('proto/dist/definition/index.js');
const { toSnapshotMessage, toDeltaMessage, definitionsHash, keepDefinitionHashes } = await load('proto/dist/snapshot/codec.js');
const { createSnapshotHolder } = await load('data-plane/dist/sync/snapshot-holder.js');
const { createTableBuilder } = await load('data-plane/dist/table/index.js');
const { createTokenStore } = await load('data-plane/dist/auth/index.js');

const size = Number(process.argv[2] ?? 10000);
const changed = Number(process.argv[3] ?? size);
const rounds = Number(process.argv[4] ?? 4);
keepDefinitionHashes(false); // as data-plane/src/main.ts

// Version v: the first `changed` APIs have target port 1000 + v, the rest 1000 (the same objects every version).
const unchanged = new Map();
const api = (i, version) => {
  if (i < changed) return parseApiDefinition(rawApi(i, `http://127.0.0.1:${1000 + version}`));
  if (!unchanged.has(i)) unchanged.set(i, parseApiDefinition(rawApi(i, 'http://127.0.0.1:1000')));
  return unchanged.get(i);
};
const content = (version) => {
  const defs = { apis: Array.from({ length: size }, (_, i) => api(i, version)), oauthServers: [] };
  return { version, hash: definitionsHash(defs), defs };
};

const holder = createSnapshotHolder({ tables: createTableBuilder({ tokenStore: createTokenStore({}) }) });
let held = content(0);
holder.apply(toSnapshotMessage(0, held.defs));
for (let version = 1; version <= rounds; version++) {
  const next = content(version);
  const delta = toDeltaMessage(held, next);
  await new Promise((r) => setTimeout(r, 200));
  const { result, wall, pause } = await withLongestPause(() => holder.applyDeltaInTurns(delta));
  if (!result?.ok) throw new Error(result?.error ?? 'not applied');
  console.log(`delta ${version}: ${changed} of ${size} APIs changed, longest pause ${pause.toFixed(1)} ms, apply ${wall.toFixed(0)} ms wall`);
  held = next;
}
process.exit(0);
