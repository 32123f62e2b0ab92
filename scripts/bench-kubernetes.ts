// `npm run bench:kubernetes`: the Kubernetes store on a real kube-apiserver + etcd (scripts/test-tools.sh).
// Prints, at each size: informer initial sync time and CP RSS; the time until every CR's status settled with
// the status PUTs, the CP's and kube-apiserver's CPU, the CP's RSS and heap meanwhile; admin write → all DPs
// serving (median, p99) with the CP's CPU per write; at the first size also the file store's writes (the baseline of the
// run) and how many CRs' statuses a data plane joining and leaving the fleet rewrites.
// Not a test: nothing here passes or fails. The services log at info: the test helpers wait for their "listening" lines. BENCH_WRITES sets the number of timed writes (default 50),
// BENCH_SIZES the CR counts (default 1000,10000), BENCH_CP_PROFILE a directory for the
// Kubernetes-store CPs' --cpu-prof profiles, BENCH_CP_NODE_FLAGS node flags added to those CPs (e.g. `--trace-gc`),
// BENCH_CP_SCRIPT=control-plane/dist/main.js runs tsc's output (a profile then names each library's files),
// BENCH_CP_LOG=<file> appends every line those CPs print (with `--trace-gc`, each collection and the heap it left). BENCH_GATEWAY_ROUTES=1000 adds the
// Gateway API section, first (scripts/bench-gateway-api.ts); BENCH_SIZES= (empty) leaves the CR sizes out.
import { appendFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { parseApiDefinition } from '#proto/definition/index';
import { createLogger } from '#proto/logger';
import { openFileStore } from '../control-plane/dist/store/file-store.js';
import { Watch, type CustomObjectsApi } from '@kubernetes/client-node';
import { createAdminClient, type AdminClient } from '../test/helpers/admin-client.js';
import { apiDefinition } from '../test/helpers/api-definition.js';
import { imageEnv } from './image-env.mjs';
import { benchAdminCreate } from './bench-admin-create.js';
import { controlPlaneIdentity, installCrds, kubeClients, type KubeClients } from '../test/helpers/gatehouse-on-kubernetes.js';
import { cpuSeconds, rssMiB } from '../test/helpers/process-stats.js';
import { apiServerCpuSeconds, startKubeApiServer, statusWritesServed, type KubeApiServer } from '../test/helpers/kube-apiserver.js';
import { startControlPlane, type ControlPlane } from '../test/helpers/start-control-plane.js';
import { startDataPlane, type DataPlane } from '../test/helpers/start-data-plane.js';
import { benchGatewayApi } from './bench-gateway-api.js';

const NAMESPACE = 'bench';
const WRITES = Number(process.env.BENCH_WRITES ?? 50);
const SIZES = (process.env.BENCH_SIZES ?? '1000,10000')
  .split(',')
  .map(Number)
  .filter((n) => n > 0);
const password = randomBytes(12).toString('hex');

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];

async function createCrs(custom: CustomObjectsApi, from: number, to: number): Promise<void> {
  let next = from;
  const worker = async () => {
    while (next < to) {
      const i = next++;
      await custom.createNamespacedCustomObject({
        group: 'gatehouse.dev',
        version: 'v1alpha1',
        namespace: NAMESPACE,
        plural: 'apidefinitions',
        body: {
          apiVersion: 'gatehouse.dev/v1alpha1',
          kind: 'ApiDefinition',
          metadata: { name: `api-${i}` },
          spec: { proxy: { listen_path: `/api-${i}/*`, upstreams: { targets: [{ target: `http://127.0.0.1:9/${i}` }] } } },
        },
      });
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
}

/** How many ApiDefinitions exist; retried while a just-installed CRD's storage answers 429 "(re)initializing". */
async function existingCrs(custom: CustomObjectsApi): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    try {
      const list = await custom.listNamespacedCustomObject({ group: 'gatehouse.dev', version: 'v1alpha1', namespace: NAMESPACE, plural: 'apidefinitions' });
      return (list as { items: unknown[] }).items.length;
    } catch (err) {
      if ((err as { code?: number }).code !== 429 || attempt >= 30) throw err;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

/**
 * A data plane whose "snapshot applied" log lines are followed: the moment it applies a version is
 * seen as it logs it. (Polling /readyz every 50 ms, as the tests' helper does, rounded each write up
 * to the next poll, by up to 50 ms: at 1,000 CRs the p99 read 76–80 ms that way, 36 ms this way.)
 */
interface WatchedDataPlane {
  dp: DataPlane;
  applied(version: number): Promise<void>;
}

async function startWatchedDataPlane(controlPlaneAddr: string): Promise<WatchedDataPlane> {
  let highest = 0;
  const waiters = new Set<{ version: number; resolve: () => void }>();
  const onLine = (raw: string) => {
    if (!raw.includes('"snapshot applied"')) return;
    highest = Math.max(highest, Number(JSON.parse(raw).version));
    for (const w of waiters) {
      if (highest < w.version) continue;
      waiters.delete(w);
      w.resolve();
    }
  };
  const dp = await startDataPlane({ controlPlaneAddr, onLine });
  const applied = (version: number) =>
    highest >= version
      ? Promise.resolve()
      : new Promise<void>((resolve, reject) => {
          const w = {
            version,
            resolve: () => {
              clearTimeout(timer);
              resolve();
            },
          };
          const timer = setTimeout(() => {
            waiters.delete(w);
            reject(new Error(`${dp.id} did not apply version ${version} in 30 s`));
          }, 30_000);
          waiters.add(w);
        });
  return { dp, applied };
}

/** Admin write → every DP has applied the write's version; ms per write, and the CP's CPU ms per write. */
async function propagation(client: AdminClient, dps: WatchedDataPlane[], prefix: string, cpPid: number): Promise<Writes> {
  const times: number[] = [];
  const windows: Array<[number, number]> = [];
  // CLOCK_MONOTONIC µs, the clock of a .cpuprofile's startTime: the window of the writes in the CP's profile.
  const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);
  const write = async (name: string): Promise<number> => {
    const started = performance.now();
    const res = await client.createApi(apiDefinition({ name, listenPath: `/${name}/*`, targets: ['http://127.0.0.1:9'] }));
    if (res.status !== 201 || res.snapshotVersion === undefined) throw new Error(`write ${name}: ${res.status} ${res.text}`);
    await Promise.all(dps.map((dp) => dp.applied(res.snapshotVersion!)));
    return performance.now() - started;
  };
  // As npm run bench: the first write after start (code not yet optimised on either side) is reported apart.
  const firstFrom = monotonicUs();
  const firstMs = await write(`${prefix}-first`);
  const cpuBefore = await cpuSeconds(cpPid);
  const windowFrom = monotonicUs();
  for (let i = 0; i < WRITES; i++) {
    const startedUs = monotonicUs();
    times.push(await write(`${prefix}-${i}`));
    windows.push([startedUs, monotonicUs()]);
  }
  const slowest = times.indexOf(Math.max(...times));
  if (process.env.BENCH_CP_PROFILE) {
    console.error(
      `bench: ${prefix} writes between monotonic ${windowFrom} and ${monotonicUs()} µs; the slowest (write ${slowest + 1}) between ${windows[slowest].join(' and ')}; the first after start between ${firstFrom} and ${windowFrom}`,
    );
  }
  return { times: times.sort((a, b) => a - b), cpuMs: (((await cpuSeconds(cpPid)) - cpuBefore) * 1000) / WRITES, slowest, firstMs };
}

interface Writes {
  times: number[];
  cpuMs: number;
  slowest: number;
  firstMs: number;
}

const writesRow = (label: string, { times, cpuMs, slowest, firstMs }: Writes) =>
  `${label} median ${quantile(times, 0.5).toFixed(1)} ms, p99 ${quantile(times, 0.99).toFixed(1)} ms (slowest: write ${slowest + 1}), CP CPU ${cpuMs.toFixed(1)} ms/write; the write before them, the first after start: ${firstMs.toFixed(1)} ms`;

/** resourceVersion of every ApiDefinition, once two lists 2 s apart agree (the status controller has settled). */
async function settledVersions(custom: CustomObjectsApi): Promise<Map<string, string>> {
  const list = async () => {
    const { items } = (await custom.listNamespacedCustomObject({
      group: 'gatehouse.dev',
      version: 'v1alpha1',
      namespace: NAMESPACE,
      plural: 'apidefinitions',
    })) as {
      items: Array<{ metadata: { name: string; resourceVersion: string } }>;
    };
    return new Map(items.map((cr) => [cr.metadata.name, cr.metadata.resourceVersion]));
  };
  let previous = await list();
  for (let attempt = 0; attempt < 300; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const current = await list();
    if ([...current].every(([name, version]) => previous.get(name) === version) && current.size === previous.size) return current;
    previous = current;
  }
  throw new Error('CR statuses still changing after 10 minutes');
}

/**
 * When the last ApiDefinition change came, seen by a watch started now: resolves once `atLeast` changes
 * came and then none for 2 s. Cheaper than lists of every CR (which, every 2 s, cost the apiserver and
 * this process more than the status writes being waited for), and exact to the event.
 */
async function lastChange(admin: KubeClients, atLeast: number): Promise<{ quiet: Promise<number> }> {
  const { metadata } = (await admin.custom.listNamespacedCustomObject({
    group: 'gatehouse.dev',
    version: 'v1alpha1',
    namespace: NAMESPACE,
    plural: 'apidefinitions',
    limit: 1,
  })) as { metadata: { resourceVersion: string } };
  let changes = 0;
  let last = performance.now();
  let resourceVersion = metadata.resourceVersion;
  let watching: AbortController | undefined;
  let done = false;
  // The apiserver ends a watch that falls behind (50,000 events): it goes on from the last event seen.
  const watch = async (): Promise<void> => {
    watching = await new Watch(admin.config).watch(
      `/apis/gatehouse.dev/v1alpha1/namespaces/${NAMESPACE}/apidefinitions`,
      { resourceVersion },
      (type: string, obj: { code?: number; metadata?: { resourceVersion?: string } }) => {
        // 410 Gone: the events since are compacted away; from now on, counting every change as seen.
        if (type === 'ERROR' && obj.code === 410) {
          resourceVersion = '';
          changes = Math.max(changes, atLeast);
        }
        resourceVersion = obj.metadata?.resourceVersion ?? resourceVersion;
        if (type !== 'MODIFIED') return;
        changes++;
        last = performance.now();
      },
      () => {
        if (!done) setTimeout(() => void watch(), 100);
      },
    );
  };
  await watch();
  const quiet = new Promise<number>((resolve) => {
    const timer = setInterval(() => {
      if (changes < atLeast || performance.now() - last < 2000) return;
      clearInterval(timer);
      done = true;
      watching?.abort();
      resolve(last);
    }, 100);
  });
  return { quiet };
}

/** CRs whose resourceVersion changed while one more data plane connected, synced, and left (status writes only: no spec changes). */
async function statusWritesOfAJoiningDataPlane(
  custom: CustomObjectsApi,
  cp: ControlPlane,
  server: KubeApiServer,
): Promise<{ changed: number; served: number }> {
  const before = await settledVersions(custom);
  const servedBefore = await statusWritesServed(server);
  const dp = await startDataPlane({ controlPlaneAddr: cp.grpcAddr });
  for (let i = 0; i < 300 && !(await dp.readyz()).ready; i++) await new Promise((resolve) => setTimeout(resolve, 100));
  await new Promise((resolve) => setTimeout(resolve, 2000));
  await dp.stop();
  const after = await settledVersions(custom);
  return { changed: [...after].filter(([name, version]) => before.get(name) !== version).length, served: (await statusWritesServed(server)) - servedBefore };
}

/** A .cpuprofile per Kubernetes-store CP (written when it stops), for Chrome DevTools. */
const PROFILE_FLAGS = [
  ...(process.env.BENCH_CP_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CP_PROFILE}`] : []),
  ...(process.env.BENCH_CP_NODE_FLAGS?.split(' ').filter(Boolean) ?? []),
];

/**
 * The CP's RSS and V8 heap in use (its /metrics: prom-client reads v8.getHeapStatistics on each scrape),
 * sampled every 250 ms until stopped: the peaks, and what the heap held at the last sample.
 */
function sampleMemory(cp: ControlPlane): { stop(): Promise<{ peakRssMiB: number; peakHeapMB: number; heapMB: number }> } {
  let peakRssMiB = 0;
  let peakHeapMB = 0;
  let heapMB = 0;
  let running = true;
  const sample = async () => {
    peakRssMiB = Math.max(peakRssMiB, await rssMiB(cp.process.pid));
    const text = await (await fetch(`${cp.adminUrl}/metrics`)).text();
    const used = text.split('\n').find((l) => l.startsWith('nodejs_heap_size_used_bytes '));
    heapMB = Number(used?.split(' ')[1] ?? 0) / 1e6;
    peakHeapMB = Math.max(peakHeapMB, heapMB);
  };
  const loop = (async () => {
    while (running) {
      await sample();
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { peakRssMiB, peakHeapMB, heapMB };
    },
  };
}

/** node's flags as the image and the Helm chart run the control plane (controlPlane.maxSemiSpaceSizeMiB). */
const CP_FLAGS = ['--max-semi-space-size=8'];

async function timedStart(env: Record<string, string>, name: string, nodeFlags: string[] = [], dataDir?: string): Promise<{ cp: ControlPlane; ms: number }> {
  const started = performance.now();
  const cp = await startControlPlane({
    name,
    // As the image runs it (deploy/Dockerfile's ENV: NODE_ENV, glibc's malloc settings), as npm run bench does.
    env: { ...imageEnv(), ADMIN_PASSWORD: password, ...env },
    nodeFlags: [...CP_FLAGS, ...nodeFlags],
    script: process.env.BENCH_CP_SCRIPT,
    onLine: process.env.BENCH_CP_LOG && env.STORE === 'kubernetes' ? (raw) => appendFileSync(process.env.BENCH_CP_LOG!, `${raw}\n`) : undefined,
    dataDir,
    startTimeoutMs: 120_000,
  });
  return { cp, ms: performance.now() - started };
}

/**
 * A DATA_DIR whose file store holds `size` APIs, written in one update as `npm run bench` seeds its
 * stores. (One POST per API, as this bench filled it before, stalled a POST past 10 s somewhere short
 * of 50,000 APIs, and the run lost every row it had measured.)
 */
async function seededFileStore(size: number): Promise<string> {
  const dataDir = await mkdtemp(join(tmpdir(), 'gatehouse-bench-store-'));
  const store = await openFileStore({ dataDir, logger: createLogger('control-plane', 'silent') });
  const apis = Array.from({ length: size }, (_, i) =>
    parseApiDefinition(apiDefinition({ name: `api-${i}`, listenPath: `/api-${i}/*`, targets: [`http://127.0.0.1:9/${i}`] })),
  );
  await store.update((defs) => ({ ...defs, apis }));
  await store.close();
  return dataDir;
}

const server = await startKubeApiServer();
try {
  const admin = await kubeClients(await server.writeKubeconfig(server.adminToken));
  await installCrds(admin);
  const identity = await controlPlaneIdentity(server, admin, NAMESPACE);
  const k8sEnv = { STORE: 'kubernetes', KUBECONFIG: identity.kubeconfig, GATEHOUSE_NAMESPACE: NAMESPACE, LEADER_ELECTION: 'false' };
  // Each row as soon as it is measured: a run that fails later keeps what it had.
  const row = (line: string) => console.log(line);
  await benchGatewayApi(server, admin, { row, cpNodeFlags: [...CP_FLAGS, ...PROFILE_FLAGS], password });

  for (const size of SIZES) {
    const have = await existingCrs(admin.custom);
    const created = performance.now();
    await createCrs(admin.custom, have, size);
    console.error(`bench: ${size - have} CRs created in ${Math.round(performance.now() - created)} ms`);
    const writesBefore = await statusWritesServed(server);
    // The CRs just created have no status yet: each is written at least once.
    const watched = await lastChange(admin, size - have);
    const cpStarted = performance.now();
    const { cp, ms } = await timedStart(k8sEnv, `cp-${size}`, PROFILE_FLAGS);
    const cpuAtServing = await cpuSeconds(cp.process.pid);
    row(`informer initial sync (process start → serving) @ ${size} CRs: ${Math.round(ms)} ms; CP RSS ${Math.round(await rssMiB(cp.process.pid))} MiB`);

    const dps = [await startWatchedDataPlane(cp.grpcAddr), await startWatchedDataPlane(cp.grpcAddr)];
    // The writes are timed once the controller has written every new CR's first status (10,000 status writes at 10,000 CRs).
    const settling = performance.now();
    const apiServerCpuBefore = await apiServerCpuSeconds(server);
    const memory = sampleMemory(cp);
    const lastWritten = await watched.quiet;
    await settledVersions(admin.custom);
    // settledVersions returns once two lists 2 s apart agree: both times include that confirming window.
    const settled = performance.now();
    const { peakRssMiB, peakHeapMB, heapMB } = await memory.stop();
    if (process.env.BENCH_CP_LOG) {
      appendFileSync(
        process.env.BENCH_CP_LOG,
        `bench: statuses settling from ${Math.round(settling - cpStarted)} to ${Math.round(settled - cpStarted)} ms after the CP's spawn\n`,
      );
    }
    if (process.env.BENCH_CP_PROFILE) {
      const us = (ms: number) => Math.round((ms - performance.now()) * 1000 + Number(process.hrtime.bigint() / 1000n));
      console.error(`bench: the CP served at monotonic ${us(cpStarted + ms)} µs; statuses settled between ${us(settling)} and ${us(settled)} µs`);
    }
    row(
      `statuses settled @ ${size} CRs (2 DPs connected): last status change ${Math.round(lastWritten - cpStarted)} ms after the CP started, ${Math.round(lastWritten - settling)} ms after the DPs did; ` +
        `confirmed by two lists 2 s apart ${Math.round(settled - cpStarted)} ms after the CP started; ` +
        `${(await statusWritesServed(server)) - writesBefore} status PUTs served; CP CPU from serving to settled ${((await cpuSeconds(cp.process.pid)) - cpuAtServing).toFixed(1)} s ` +
        `(kube-apiserver's from the DPs' start ${((await apiServerCpuSeconds(server)) - apiServerCpuBefore).toFixed(1)} s); ` +
        `CP RSS ${Math.round(await rssMiB(cp.process.pid))} MiB (peak ${Math.round(peakRssMiB)}); V8 heap in use peak ${Math.round(peakHeapMB)} MB, ${Math.round(heapMB)} MB when settled (sampled every 250 ms)`,
    );
    const client = await createAdminClient(cp);
    await client.login();
    const k8s = await propagation(client, dps, `k8s-${size}`, cp.process.pid);
    row(writesRow(`admin write → 2 DPs serving @ ${size} CRs, ${WRITES} writes: kubernetes`, k8s));
    if (size === SIZES[0]) {
      const { changed, served } = await statusWritesOfAJoiningDataPlane(admin.custom, cp, server);
      row(
        `status writes when a third data plane joins and leaves @ ${size + WRITES + 1} CRs: ${changed} CRs' resourceVersion changed, ${served} status writes served`,
      );
    }
    for (const { dp } of dps) await dp.stop();

    if (size === SIZES[0]) {
      const dataDir = await seededFileStore(size);
      const file = await timedStart({}, 'cp-file', [], dataDir);
      const fileClient = await createAdminClient(file.cp);
      await fileClient.login();
      const fileDps = [await startWatchedDataPlane(file.cp.grpcAddr), await startWatchedDataPlane(file.cp.grpcAddr)];
      const baseline = await propagation(fileClient, fileDps, 'file', file.cp.process.pid);
      for (const { dp } of fileDps) await dp.stop();
      await file.cp.dispose();
      await rm(dataDir, { recursive: true, force: true });
      row(
        `${writesRow(`admin write → 2 DPs serving @ ${size} APIs, ${WRITES} writes: file store (baseline)`, baseline)}; kubernetes/file median ${(quantile(k8s.times, 0.5) / quantile(baseline.times, 0.5)).toFixed(2)}×`,
      );
    }
    await cp.dispose();
  }
  // BENCH_ADMIN_CREATE=N: N APIs created through the admin API (scripts/bench-admin-create.ts).
  if (process.env.BENCH_ADMIN_CREATE) {
    await benchAdminCreate({ server, admin, startCp: (env, name) => timedStart(env, name, PROFILE_FLAGS), startDp: startWatchedDataPlane, row: console.log });
  }
} finally {
  await server.stop();
}
