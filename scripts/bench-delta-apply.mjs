// How long a data plane takes to apply a one-API delta while it holds N APIs, in-process (docs/operations.md
// "Propagation"): plain APIs, every API with a passive health check, every API with a cb plugin. Not part of
// the product or the tests. The holder, codec and registries are the DP's own (tsc's files); 30 deltas,
// each changing one API, are built as the CP builds them and applied as the stream client applies them.
//   npm run build && node --max-semi-space-size=8 scripts/bench-delta-apply.mjs [N=10000] [plain|health|cb ...]
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { rawApi } from './bench-apis.mjs';

const root = resolve(import.meta.dirname, '..');
const load = (path) => import(pathToFileURL(join(root, path)).href);
const [sizeArg, ...modeArgs] = process.argv.slice(2);
const size = Number(sizeArg ?? 10000);
const modes = modeArgs.length > 0 ? modeArgs : ['plain', 'health', 'cb'];
const DELTAS = 30;

const { parseApiDefinition } = await load('proto/dist/definition/index.js');
const { toSnapshotMessage, toDeltaMessage } = await load('proto/dist/snapshot/codec.js');
const { loadGatehouseProto } = await load('proto/dist/grpc.js');
const { createSnapshotHolder } = await load('data-plane/dist/sync/snapshot-holder.js');
const { createTableBuilder } = await load('data-plane/dist/table/index.js');
const { createTokenStore } = await load('data-plane/dist/auth/index.js');
const { createHealthRegistry } = await load('data-plane/dist/health/index.js');

const cp = loadGatehouseProto();
const dp = loadGatehouseProto({ lazyDefinitions: true });

for (const mode of modes) {
  const api = (i, stripPath) => {
    const raw = rawApi(i);
    if (stripPath !== undefined) raw.proxy = { ...raw.proxy, strip_path: stripPath };
    if (mode === 'health') raw.proxy.upstreams = { ...raw.proxy.upstreams, health_check: { passive: {} } };
    if (mode === 'cb') raw.plugins = [{ name: 'cb', config: {} }];
    return parseApiDefinition(raw);
  };
  const defs = { apis: Array.from({ length: size }, (_, i) => api(i)), oauthServers: [] };
  const health = createHealthRegistry({ probe: async () => null });
  const holder = createSnapshotHolder({ tables: createTableBuilder({ tokenStore: createTokenStore({}), health }) });
  const full = holder.apply(
    dp.Client.service.StreamSnapshots.responseDeserialize(cp.wrapPush('bench', cp.encodeSnapshot(toSnapshotMessage(1, defs)))).snapshot,
  );
  if (!full.ok) throw new Error(full.error);
  let content = holder.content();
  const ms = [];
  for (let k = 0; k < DELTAS; k++) {
    const changed = api(k, k % 2 === 0);
    const apis = content.defs.apis.map((a) => (a.name === changed.name ? changed : a));
    const next = { version: content.version + 1, defs: { ...content.defs, apis } };
    next.hash = toSnapshotMessage(next.version, next.defs).hash;
    const delta = toDeltaMessage(content, next);
    const start = process.hrtime.bigint();
    const result = holder.applyDelta(delta);
    ms.push(Number(process.hrtime.bigint() - start) / 1e6);
    if (!result.ok) throw new Error(result.error);
    content = holder.content();
  }
  health.stop();
  ms.sort((a, b) => a - b);
  console.log(
    `${mode.padEnd(6)} ${size} APIs: one-API delta applied in ${ms[DELTAS >> 1].toFixed(2)} ms (median of ${DELTAS}), max ${ms.at(-1).toFixed(2)} ms`,
  );
}
process.exit(0);
