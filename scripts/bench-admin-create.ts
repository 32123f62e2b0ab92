// bench:kubernetes's `BENCH_ADMIN_CREATE=N` phase: N APIs created through the admin API of a Kubernetes-store CP,
// each one CR written by the CP to the real kube-apiserver, in a namespace of their own that starts empty.
// (a) one POST /apis per API, BENCH_ADMIN_IN_FLIGHT at a time (default 8): APIs/s, p50/p99 per POST, CP and
// kube-apiserver CPU per API, status PUTs served, CP RSS after, the time until both data planes serve the last
// one; then the same CP restarted over the N CRs (informer sync, process start → serving).
// (b) PUT /config of BENCH_ADMIN_CONFIG APIs (default: as many of the N as fit its 1 MiB body) in another empty
// namespace: one request whose CRs the CP creates one after another (BENCH_ADMIN_CONFIG=0: none).
import { apiServerCpuSeconds, statusWritesServed, type KubeApiServer } from '../test/helpers/kube-apiserver.js';
import { controlPlaneIdentity, type KubeClients } from '../test/helpers/gatehouse-on-kubernetes.js';
import { createAdminClient } from '../test/helpers/admin-client.js';
import { apiDefinition } from '../test/helpers/api-definition.js';
import { httpRequest } from '../test/helpers/http-request.js';
import { cpuSeconds, rssMiB } from '../test/helpers/process-stats.js';
import type { ControlPlane } from '../test/helpers/start-control-plane.js';
import type { DataPlane } from '../test/helpers/start-data-plane.js';

export interface AdminCreateContext {
  server: KubeApiServer;
  admin: KubeClients;
  /** Starts a Kubernetes-store CP with these variables (as bench-kubernetes.ts starts its own); `ms` from spawn to serving. */
  startCp(env: Record<string, string>, name: string): Promise<{ cp: ControlPlane; ms: number }>;
  /** A data plane whose `applied(version)` resolves once it logged that version applied. */
  startDp(grpcAddr: string): Promise<{ dp: DataPlane; applied(version: number): Promise<void> }>;
  row(line: string): void;
}

/** The admin API's body limit (control-plane/src/admin/app.ts, MAX_BODY_BYTES). */
const MAX_BODY_BYTES = 1024 * 1024;

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
const definition = (i: number) => apiDefinition({ name: `adm-${i}`, listenPath: `/adm-${i}/*`, targets: [`http://127.0.0.1:9/${i}`] });
const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);

async function kubernetesCp(ctx: AdminCreateContext, namespace: string, name: string) {
  const identity = await controlPlaneIdentity(ctx.server, ctx.admin, namespace);
  const env = { STORE: 'kubernetes', KUBECONFIG: identity.kubeconfig, GATEHOUSE_NAMESPACE: namespace, LEADER_ELECTION: 'false' };
  return { env, ...(await ctx.startCp(env, name)) };
}

export async function benchAdminCreate(ctx: AdminCreateContext): Promise<void> {
  const n = Number(process.env.BENCH_ADMIN_CREATE);
  // The store writes one CR at a time (its update queue): the POSTs in flight beyond one only keep that queue fed
  // while each answer travels back, and each POST's time includes its wait in the queue.
  const inFlight = Number(process.env.BENCH_ADMIN_IN_FLIGHT ?? 8);
  await postEach(ctx, n, inFlight);
  await putConfig(ctx, n);
}

async function postEach(ctx: AdminCreateContext, n: number, inFlight: number): Promise<void> {
  const { cp, env } = await kubernetesCp(ctx, 'bench-admin-post', 'cp-admin-post');
  const dps = [await ctx.startDp(cp.grpcAddr), await ctx.startDp(cp.grpcAddr)];
  const client = await createAdminClient(cp);
  await client.login();
  const pid = cp.process.pid;
  const [cpuBefore, apiCpuBefore, putsBefore] = [await cpuSeconds(pid), await apiServerCpuSeconds(ctx.server), await statusWritesServed(ctx.server)];
  const headers = { authorization: `Bearer ${client.token}`, 'content-type': 'application/json' };
  const times: number[] = [];
  const failed: string[] = [];
  let next = 0;
  let lastVersion = 0;
  let lastAnswered = 0;
  const fromUs = monotonicUs();
  const started = performance.now();
  const worker = async () => {
    while (next < n) {
      const i = next++;
      const t = performance.now();
      // The tests' client gives up after 10 s; here a slow POST is a figure, and a refused one is counted, not fatal.
      const res = await httpRequest(`${cp.adminUrl}/apis`, { method: 'POST', headers, body: JSON.stringify(definition(i)), timeoutMs: 120_000 });
      lastAnswered = performance.now();
      const version = Number(res.headers['x-snapshot-version']);
      if (res.status !== 201 || !Number.isSafeInteger(version)) {
        failed.push(`adm-${i}: ${res.status} ${res.text.slice(0, 200)}`);
        continue;
      }
      times.push(lastAnswered - t);
      lastVersion = Math.max(lastVersion, version);
      if ((i + 1) % 5000 === 0) console.error(`bench: ${i + 1} APIs posted in ${Math.round(performance.now() - started)} ms`);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  const postedMs = lastAnswered - started;
  await Promise.all(dps.map((dp) => dp.applied(lastVersion)));
  const servedMs = performance.now() - started;
  const toUs = monotonicUs();
  const cpuMs = ((await cpuSeconds(pid)) - cpuBefore) * 1000;
  const apiCpuMs = ((await apiServerCpuSeconds(ctx.server)) - apiCpuBefore) * 1000;
  const puts = (await statusWritesServed(ctx.server)) - putsBefore;
  times.sort((a, b) => a - b);
  if (process.env.BENCH_CP_PROFILE) console.error(`bench: admin POSTs between monotonic ${fromUs} and ${toUs} µs (the cp-admin-post profile)`);
  ctx.row(
    `admin API create @ ${n} APIs, one POST /apis each, ${inFlight} in flight: ${Math.round(postedMs)} ms (${((n * 1000) / postedMs).toFixed(1)} APIs/s); ` +
      `per POST median ${quantile(times, 0.5).toFixed(1)} ms, p99 ${quantile(times, 0.99).toFixed(1)} ms, max ${times[times.length - 1].toFixed(1)} ms; ` +
      `both DPs serving the last ${Math.round(servedMs - postedMs)} ms after its answer (${Math.round(servedMs)} ms from the first POST); ` +
      `CP CPU ${(cpuMs / n).toFixed(2)} ms/API, kube-apiserver CPU ${(apiCpuMs / n).toFixed(2)} ms/API meanwhile; ${puts} status PUTs served meanwhile; ` +
      `CP RSS after ${Math.round(await rssMiB(pid))} MiB; ${failed.length} POSTs refused${failed.length ? ` (first: ${failed[0]})` : ''}`,
  );
  for (const { dp } of dps) await dp.stop();
  await cp.dispose();
  const again = await ctx.startCp(env, 'cp-admin-post-restart');
  ctx.row(
    `informer initial sync (process start → serving) @ ${n} CRs created through the admin API: ${Math.round(again.ms)} ms; CP RSS ${Math.round(await rssMiB(again.cp.process.pid))} MiB`,
  );
  await again.cp.dispose();
}

async function putConfig(ctx: AdminCreateContext, n: number): Promise<void> {
  // As many of the N as fit the body limit, unless BENCH_ADMIN_CONFIG asks for a number (over the limit: the 413 is the row).
  let fits = 0;
  let bytes = '{"apis":[]}'.length;
  while (fits < n && bytes + JSON.stringify(definition(fits)).length + 1 <= MAX_BODY_BYTES) bytes += JSON.stringify(definition(fits++)).length + 1;
  const m = Number(process.env.BENCH_ADMIN_CONFIG ?? fits);
  if (m === 0) return;
  const body = JSON.stringify({ apis: Array.from({ length: m }, (_, i) => definition(i)) });
  const { cp } = await kubernetesCp(ctx, 'bench-admin-config', 'cp-admin-config');
  const dps = [await ctx.startDp(cp.grpcAddr), await ctx.startDp(cp.grpcAddr)];
  const client = await createAdminClient(cp);
  await client.login();
  const pid = cp.process.pid;
  const cpuBefore = await cpuSeconds(pid);
  const fromUs = monotonicUs();
  const started = performance.now();
  const res = await httpRequest(`${cp.adminUrl}/config`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${client.token}`, 'content-type': 'application/json' },
    body,
    timeoutMs: 3_600_000,
  });
  const answeredMs = performance.now() - started;
  if (res.status !== 200) {
    ctx.row(`admin API create @ ${m} APIs, one PUT /config (${body.length} bytes): ${res.status} ${res.text.slice(0, 200)} after ${Math.round(answeredMs)} ms`);
  } else {
    const version = (res.json as { version: number }).version;
    await Promise.all(dps.map((dp) => dp.applied(version)));
    const servedMs = performance.now() - started;
    if (process.env.BENCH_CP_PROFILE) console.error(`bench: PUT /config between monotonic ${fromUs} and ${monotonicUs()} µs (the cp-admin-config profile)`);
    ctx.row(
      `admin API create @ ${m} APIs, one PUT /config (${body.length} bytes; ${fits} of the bench's APIs fit its 1 MiB body): answered in ${Math.round(answeredMs)} ms ` +
        `(${((m * 1000) / answeredMs).toFixed(1)} APIs/s); both DPs serving ${Math.round(servedMs - answeredMs)} ms after; ` +
        `CP CPU ${((((await cpuSeconds(pid)) - cpuBefore) * 1000) / m).toFixed(2)} ms/API; CP RSS after ${Math.round(await rssMiB(pid))} MiB`,
    );
  }
  for (const { dp } of dps) await dp.stop();
  await cp.dispose();
}
