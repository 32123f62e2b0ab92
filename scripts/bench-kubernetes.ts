// `npm run bench:kubernetes`: the Kubernetes store on a real kube-apiserver + etcd (scripts/test-tools.sh).
// Prints, at each size: informer initial sync time and CP RSS, and admin write → all DPs serving (median,
// p99) with the CP's CPU per write; at the first size also the file store's writes (the baseline of the
// run) and how many CRs' statuses a data plane joining and leaving the fleet rewrites.
// Not a test: nothing here passes or fails. The services log at info: the test helpers wait for their "listening" lines. BENCH_WRITES sets the number of timed writes (default 50),
// BENCH_SIZES the CR counts (default 1000,10000), BENCH_CP_PROFILE a directory for the
// Kubernetes-store CPs' --cpu-prof profiles. BENCH_GATEWAY_ROUTES=1000 adds the Gateway API section, first
// (scripts/bench-gateway-api.ts); BENCH_SIZES= (empty) leaves the CR sizes out.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { parseApiDefinition } from '#proto/definition/index';
import { createLogger } from '#proto/logger';
import { openFileStore } from '../control-plane/dist/store/file-store.js';
import type { CustomObjectsApi } from '@kubernetes/client-node';
import { createAdminClient, type AdminClient } from '../test/helpers/admin-client.js';
import { apiDefinition } from '../test/helpers/api-definition.js';
import { controlPlaneIdentity, installCrds, kubeClients } from '../test/helpers/gatehouse-on-kubernetes.js';
import { cpuSeconds, rssMiB } from '../test/helpers/process-stats.js';
import { startKubeApiServer, statusWritesServed, type KubeApiServer } from '../test/helpers/kube-apiserver.js';
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
const PROFILE_FLAGS = process.env.BENCH_CP_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CP_PROFILE}`] : [];

/** node's flags as the image and the Helm chart run the control plane (controlPlane.maxSemiSpaceSizeMiB). */
const CP_FLAGS = ['--max-semi-space-size=8'];

async function timedStart(env: Record<string, string>, name: string, nodeFlags: string[] = [], dataDir?: string): Promise<{ cp: ControlPlane; ms: number }> {
  const started = performance.now();
  const cp = await startControlPlane({
    name,
    env: { ADMIN_PASSWORD: password, ...env },
    nodeFlags: [...CP_FLAGS, ...nodeFlags],
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
    const cpStarted = performance.now();
    const writesBefore = await statusWritesServed(server);
    const { cp, ms } = await timedStart(k8sEnv, `cp-${size}`, PROFILE_FLAGS);
    const cpuAtServing = await cpuSeconds(cp.process.pid);
    row(`informer initial sync (process start → serving) @ ${size} CRs: ${Math.round(ms)} ms; CP RSS ${Math.round(await rssMiB(cp.process.pid))} MiB`);

    const dps = [await startWatchedDataPlane(cp.grpcAddr), await startWatchedDataPlane(cp.grpcAddr)];
    // The writes are timed once the controller has written every new CR's first status (10,000 status writes at 10,000 CRs).
    const settling = performance.now();
    await settledVersions(admin.custom);
    // settledVersions returns once two lists 2 s apart agree: both times include that confirming window.
    const settled = performance.now();
    row(
      `statuses settled @ ${size} CRs (2 DPs connected): ${Math.round(settled - cpStarted)} ms after the CP started, ${Math.round(settled - settling)} ms after the DPs did; ` +
        `${(await statusWritesServed(server)) - writesBefore} status PUTs served; CP CPU from serving to settled ${((await cpuSeconds(cp.process.pid)) - cpuAtServing).toFixed(1)} s; ` +
        `CP RSS ${Math.round(await rssMiB(cp.process.pid))} MiB`,
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
} finally {
  await server.stop();
}
