// The Gateway API section of `npm run bench:kubernetes` (BENCH_GATEWAY_ROUTES=1000): one GatewayClass, one Gateway
// with one HTTP listener and N HTTPRoutes attached to it, on the bench's kube-apiserver, with the Gateway API
// standard CRDs that scripts/test-tools.sh fetches. Each route has its own path on one of 5 hostnames (as Envoy
// Gateway's scale test spreads its routes) and a backendRef to one of BENCH_GATEWAY_SERVICES Services (default
// 100), whose EndpointSlices point at two real upstreams, as the endpoint controller would write them. A CP with
// GATEWAY_API=true and STORE=kubernetes (the chart's node flags), two DPs.
// Prints: CP start → every route served by both DPs (their `snapshot applied` line holding every route, then
// confirmed by a real request per route and DP) and → every route Accepted + ResolvedRefs with the listener's
// attachedRoutes = N; CP and DP RSS; status PUTs served; then BENCH_GATEWAY_CHANGES timed changes (a new route,
// a path changed, a backend changed, in turn) until a real request through both DPs gets the change's answer,
// with the CP's CPU per change; and the CP's CPU while idle (its periodic status resync).
import { readdir, readFile } from 'node:fs/promises';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { loadAllYaml, type KubernetesObject } from '@kubernetes/client-node';
import { controlPlaneIdentity, createObject, type KubeClients } from '../test/helpers/gatehouse-on-kubernetes.js';
import { KUBE_TOOLS_BIN, statusWritesServed, type KubeApiServer } from '../test/helpers/kube-apiserver.js';
import { cpuSeconds, rssMiB } from '../test/helpers/process-stats.js';
import { startControlPlane } from '../test/helpers/start-control-plane.js';
import { startDataPlane, type DataPlane } from '../test/helpers/start-data-plane.js';
import { startUpstream, type Upstream } from '../test/helpers/upstream-server.js';

const NAMESPACE = 'gateway-bench';
const GROUP = 'gateway.networking.k8s.io';
const CONTROLLER = 'gatehouse.dev/gateway-controller';
const HOSTS = 5;
const ROUTES = Number(process.env.BENCH_GATEWAY_ROUTES ?? 0);
const SERVICES = Number(process.env.BENCH_GATEWAY_SERVICES ?? 100);
const CHANGES = Number(process.env.BENCH_GATEWAY_CHANGES ?? 30);

const host = (i: number) => `www.benchmark-${i % HOSTS}.example`;
const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** CLOCK_MONOTONIC µs, the clock of a .cpuprofile's startTime: a window printed with BENCH_CP_PROFILE. */
const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);
const profileWindow = (what: string, fromUs: number) => {
  if (process.env.BENCH_CP_PROFILE) console.error(`bench: gateway api ${what} between monotonic ${fromUs} and ${monotonicUs()} µs`);
};

/** Creates what `make(i)` gives for i in [0, n), 16 at a time. */
async function createAll(admin: KubeClients, n: number, make: (i: number) => KubernetesObject): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < n) await createObject(admin, make(next++));
  };
  await Promise.all(Array.from({ length: 16 }, worker));
}

const httpRoute = (name: string, i: number, path: string, service: string): KubernetesObject =>
  ({
    apiVersion: `${GROUP}/v1`,
    kind: 'HTTPRoute',
    metadata: { name, namespace: NAMESPACE },
    spec: {
      parentRefs: [{ name: 'bench' }],
      hostnames: [host(i)],
      rules: [{ matches: [{ path: { type: 'PathPrefix', value: path } }], backendRefs: [{ name: service, port: 8080 }] }],
    },
  }) as KubernetesObject;

async function installGatewayApi(admin: KubeClients): Promise<void> {
  const dir = join(KUBE_TOOLS_BIN, '..', 'gateway-api');
  const files = (await readdir(dir).catch(() => [])).filter((f) => f.endsWith('.yaml'));
  if (!files.length) throw new Error(`no Gateway API CRDs in ${dir}: run \`bash scripts/test-tools.sh\``);
  for (const file of files)
    for (const crd of loadAllYaml(await readFile(join(dir, file), 'utf8')) as KubernetesObject[]) if (crd) await createObject(admin, crd);
  for (let attempt = 0; ; attempt++) {
    const listed = await admin.custom.listNamespacedCustomObject({ group: GROUP, version: 'v1', namespace: NAMESPACE, plural: 'httproutes' }).catch(() => null);
    if (listed) break;
    if (attempt >= 60) throw new Error('the Gateway API CRDs are not served after 30 s');
    await sleep(500);
  }
  // deploy/rbac/gateway-api-role.yaml, bound to the CP's ServiceAccount, as the chart binds it.
  const subjects = [{ kind: 'ServiceAccount', name: 'gatehouse-control-plane', namespace: NAMESPACE }];
  for (const doc of loadAllYaml(await readFile(join(process.cwd(), 'deploy/rbac/gateway-api-role.yaml'), 'utf8')) as KubernetesObject[]) {
    await createObject(admin, doc);
    await createObject(admin, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: doc.metadata!.name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: doc.kind, name: doc.metadata!.name },
      subjects,
    } as KubernetesObject);
  }
}

/** Services `svc-0`… (port 8080), each with one EndpointSlice on `upstream`'s port. */
async function services(admin: KubeClients, address: string, upstreamOf: (i: number) => Upstream): Promise<void> {
  await createAll(admin, SERVICES, (i) => ({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: `svc-${i}`, namespace: NAMESPACE },
    spec: { clusterIP: 'None', ports: [{ name: 'http', port: 8080 }] } as never,
  }));
  await createAll(admin, SERVICES, (i) => ({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: `svc-${i}-0`, namespace: NAMESPACE, labels: { 'kubernetes.io/service-name': `svc-${i}` } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: upstreamOf(i).port, protocol: 'TCP' }],
    endpoints: [{ addresses: [address], conditions: { ready: true } }],
  }));
}

/** The upstream (its `x-upstream` name) that answers `path` on `host` through `dp`, or the status it answers otherwise. */
async function answeredBy(dp: DataPlane, hostname: string, path: string): Promise<string> {
  const res = await dp.request('GET', path, { headers: { host: hostname }, timeoutMs: 5_000 });
  return res.status === 200 ? String(res.headers['x-upstream'] ?? '') : `${res.status}`;
}

/** A DP whose `snapshot applied` lines are followed: when it first held `routes` routes. */
async function startCountingDataPlane(controlPlaneAddr: string, routes: number): Promise<{ dp: DataPlane; allRoutes: Promise<number> }> {
  let resolve!: (at: number) => void;
  const allRoutes = new Promise<number>((r) => {
    resolve = r;
  });
  const onLine = (raw: string) => {
    if (raw.includes('"snapshot applied"') && Number(JSON.parse(raw).routes) >= routes) resolve(performance.now());
  };
  return { dp: await startDataPlane({ controlPlaneAddr, onLine, waitForSnapshot: false }), allRoutes };
}

interface RouteStatusCounts {
  accepted: number;
  attachedRoutes: number;
}

/** Routes whose status from our controller has Accepted and ResolvedRefs True at their generation, and the listener's attachedRoutes. */
async function statusCounts(admin: KubeClients): Promise<RouteStatusCounts> {
  const { items } = (await admin.custom.listNamespacedCustomObject({ group: GROUP, version: 'v1', namespace: NAMESPACE, plural: 'httproutes' })) as {
    items: Array<{
      metadata: { generation: number };
      status?: { parents?: Array<{ controllerName: string; conditions: Array<{ type: string; status: string; observedGeneration: number }> }> };
    }>;
  };
  const accepted = items.filter((r) => {
    const ours = r.status?.parents?.find((p) => p.controllerName === CONTROLLER);
    const holds = (type: string) => ours?.conditions.some((c) => c.type === type && c.status === 'True' && c.observedGeneration === r.metadata.generation);
    return holds('Accepted') && holds('ResolvedRefs');
  }).length;
  const gw = (await admin.custom.getNamespacedCustomObject({ group: GROUP, version: 'v1', namespace: NAMESPACE, plural: 'gateways', name: 'bench' })) as {
    status?: { listeners?: Array<{ attachedRoutes: number }> };
  };
  return { accepted, attachedRoutes: gw.status?.listeners?.[0]?.attachedRoutes ?? 0 };
}

async function statusPuts(server: KubeApiServer): Promise<number> {
  return (
    (await statusWritesServed(server, 'httproutes')) + (await statusWritesServed(server, 'gateways')) + (await statusWritesServed(server, 'gatewayclasses'))
  );
}

export async function benchGatewayApi(
  server: KubeApiServer,
  admin: KubeClients,
  options: { row: (line: string) => void; cpNodeFlags: string[]; password: string },
): Promise<void> {
  if (!ROUTES) return;
  const { row } = options;
  const address = Object.values(networkInterfaces())
    .flat()
    .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
  if (!address) throw new Error('the Gateway API bench needs a non-loopback IPv4 address (EndpointSlices refuse loopback)');
  const identity = await controlPlaneIdentity(server, admin, NAMESPACE);
  await installGatewayApi(admin);
  const upstreams = [
    await startUpstream('backend-a', { kind: 'fixed' }, { host: address }),
    await startUpstream('backend-b', { kind: 'fixed' }, { host: address }),
  ];
  // svc-<even> answers backend-a, svc-<odd> backend-b: a backend change is seen in the answer's x-upstream.
  await services(admin, address, (i) => upstreams[i % 2]);
  await createObject(admin, {
    apiVersion: `${GROUP}/v1`,
    kind: 'GatewayClass',
    metadata: { name: 'gatehouse' },
    spec: { controllerName: CONTROLLER },
  } as KubernetesObject);
  await createObject(admin, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Gateway',
    metadata: { name: 'bench', namespace: NAMESPACE },
    spec: { gatewayClassName: 'gatehouse', listeners: [{ name: 'http', protocol: 'HTTP', port: 80 }] },
  } as KubernetesObject);
  const created = performance.now();
  await createAll(admin, ROUTES, (i) => httpRoute(`route-${i}`, i, `/route-${i}`, `svc-${(2 * i) % SERVICES}`));
  console.error(`bench: ${ROUTES} HTTPRoutes (and ${SERVICES} Services, EndpointSlices) created in ${Math.round(performance.now() - created)} ms`);

  const putsBefore = await statusPuts(server);
  const started = performance.now();
  const startedUs = monotonicUs();
  const cp = await startControlPlane({
    name: 'cp-gateway-api',
    env: {
      ADMIN_PASSWORD: options.password,
      STORE: 'kubernetes',
      GATEWAY_API: 'true',
      KUBECONFIG: identity.kubeconfig,
      GATEHOUSE_NAMESPACE: NAMESPACE,
      LEADER_ELECTION: 'false',
    },
    nodeFlags: options.cpNodeFlags,
    startTimeoutMs: 120_000,
  });
  const listening = performance.now();
  const cpPid = cp.process.pid;
  const cpuAtListening = await cpuSeconds(cpPid);
  try {
    const dps = await Promise.all([startCountingDataPlane(cp.grpcAddr, ROUTES), startCountingDataPlane(cp.grpcAddr, ROUTES)]);
    // Statuses are polled beside the DPs' sync: whichever comes first.
    let settledAt = 0;
    const settling = (async () => {
      for (let i = 0; i < 600; i++) {
        const { accepted, attachedRoutes } = await statusCounts(admin);
        if (accepted === ROUTES && attachedRoutes === ROUTES) return (settledAt = performance.now());
        await sleep(250);
      }
      throw new Error(`HTTPRoute statuses not all Accepted after 150 s: ${JSON.stringify(await statusCounts(admin))}`);
    })();
    const allRoutes = await Promise.race([Promise.all(dps.map((d) => d.allRoutes)), sleep(180_000).then(() => null)]);
    if (!allRoutes) throw new Error(`the data planes did not hold ${ROUTES} routes within 180 s\n${cp.recentLogs(30)}`);
    const servingMs = Math.max(...allRoutes) - started;
    const cpRssServing = await rssMiB(cpPid);
    // Every route answered through both DPs by the upstream its Service points at: the routes a DP holds may
    // still wait for their Service's endpoints (503), so the sweep repeats over the routes not yet answered.
    const sweeps: number[] = [];
    let lastSweepFrom = 0;
    let wrong: string[] = [];
    for (let pending = dps.flatMap(({ dp }) => Array.from({ length: ROUTES }, (_, i) => ({ dp, i }))); pending.length; ) {
      if (sweeps.length >= 300) throw new Error(`${pending.length} routes not served as written after 300 sweeps, e.g. ${wrong.slice(0, 3).join('; ')}`);
      const missed: typeof pending = [];
      wrong = [];
      let next = 0;
      lastSweepFrom = performance.now() - started;
      await Promise.all(
        Array.from({ length: 32 }, async () => {
          while (next < pending.length) {
            const { dp, i } = pending[next++];
            const got = await answeredBy(dp, host(i), `/route-${i}/x`);
            if (got === upstreams[((2 * i) % SERVICES) % 2].name) continue;
            missed.push({ dp, i });
            wrong.push(`${dp.id} route-${i}: ${got}`);
          }
        }),
      );
      sweeps.push(missed.length);
      pending = missed;
      if (pending.length) await sleep(100);
    }
    const confirmedMs = performance.now() - started;
    row(
      `gateway api @ ${ROUTES} HTTPRoutes: CP start → listening ${Math.round(listening - started)} ms, → both DPs hold every route ${Math.round(servingMs)} ms ` +
        `(every route then answered through both DPs by its backend by ${Math.round(confirmedMs)} ms, in the sweep begun at ${Math.round(lastSweepFrom)} ms; requests not yet answered after each sweep: ${sweeps.join(', ')}); CP RSS ${Math.round(cpRssServing)} MiB; ` +
        `DP RSS ${(await Promise.all(dps.map(({ dp }) => rssMiB(dp.process.pid)))).map(Math.round).join(', ')} MiB`,
    );
    await settling;
    profileWindow('start until statuses settled', startedUs);
    // Status writes still under way after every route is Accepted would show here (a write storm).
    await sleep(2000);
    const putsSettled = await statusPuts(server);
    row(
      `gateway api @ ${ROUTES} HTTPRoutes: CP start → every route Accepted + ResolvedRefs and attachedRoutes ${ROUTES}: ${Math.round(settledAt - started)} ms; ` +
        `${putsSettled - putsBefore} status PUTs served (2 s later); CP CPU from listening to then ${((await cpuSeconds(cpPid)) - cpuAtListening).toFixed(1)} s; ` +
        `CP RSS ${Math.round(await rssMiB(cpPid))} MiB`,
    );

    // Idle: the CP's periodic status resync (every 10 s) over 30 s, and the status PUTs it makes.
    const idleCpu = await cpuSeconds(cpPid);
    const idleFrom = monotonicUs();
    await sleep(30_000);
    profileWindow('idle', idleFrom);
    row(
      `gateway api @ ${ROUTES} HTTPRoutes, idle 30 s: CP CPU ${(((await cpuSeconds(cpPid)) - idleCpu) * 1000).toFixed(0)} ms, ${(await statusPuts(server)) - putsSettled} status PUTs`,
    );

    // Timed changes: each applied through the apiserver, timed until a request through both DPs gets its answer.
    const times: Record<string, number[]> = { create: [], path: [], backend: [] };
    const putsBeforeChanges = await statusPuts(server);
    const cpuBefore = await cpuSeconds(cpPid);
    const changesFrom = monotonicUs();
    for (let c = 0; c < CHANGES; c++) {
      const kind = (['create', 'path', 'backend'] as const)[c % 3];
      const i = kind === 'create' ? ROUTES + c : c; // route-c, changed once
      let path = `/route-${i}`;
      let expected = upstreams[0].name;
      const t0 = performance.now();
      if (kind === 'create') {
        await admin.custom.createNamespacedCustomObject({
          group: GROUP,
          version: 'v1',
          namespace: NAMESPACE,
          plural: 'httproutes',
          body: httpRoute(`route-${i}`, i, path, 'svc-0'),
        });
      } else {
        const current = (await admin.custom.getNamespacedCustomObject({
          group: GROUP,
          version: 'v1',
          namespace: NAMESPACE,
          plural: 'httproutes',
          name: `route-${i}`,
        })) as {
          spec: { rules: Array<{ matches: Array<{ path: { value: string } }>; backendRefs: Array<{ name: string }> }> };
        };
        const rule = current.spec.rules[0];
        if (kind === 'path') {
          path = `/route-${i}-moved`;
          rule.matches[0].path.value = path;
          expected = upstreams[((2 * i) % SERVICES) % 2].name;
        } else {
          rule.backendRefs[0].name = 'svc-1';
          expected = upstreams[1].name;
        }
        await admin.custom.replaceNamespacedCustomObject({
          group: GROUP,
          version: 'v1',
          namespace: NAMESPACE,
          plural: 'httproutes',
          name: `route-${i}`,
          body: current,
        });
      }
      await Promise.all(
        dps.map(async ({ dp }) => {
          for (const deadline = performance.now() + 30_000; (await answeredBy(dp, host(i), `${path}/x`)) !== expected; await sleep(5))
            if (performance.now() > deadline) throw new Error(`${dp.id}: ${kind} of route-${i} not served in 30 s`);
        }),
      );
      times[kind].push(performance.now() - t0);
    }
    const cpuMs = (((await cpuSeconds(cpPid)) - cpuBefore) * 1000) / CHANGES;
    profileWindow('changes', changesFrom);
    await sleep(2000);
    const all = Object.values(times)
      .flat()
      .sort((a, b) => a - b);
    const stats = (t: number[]) => {
      const s = [...t].sort((a, b) => a - b);
      return `median ${quantile(s, 0.5).toFixed(0)} ms, p99 ${quantile(s, 0.99).toFixed(0)} ms`;
    };
    row(
      `gateway api @ ${ROUTES} HTTPRoutes, route change → both DPs serving, ${CHANGES} changes: ${stats(all)} (create ${stats(times.create)}; path ${stats(times.path)}; ` +
        `backend ${stats(times.backend)}); CP CPU ${cpuMs.toFixed(1)} ms/change; ${(((await statusPuts(server)) - putsBeforeChanges) / CHANGES).toFixed(1)} status PUTs/change; ` +
        `CP RSS ${Math.round(await rssMiB(cpPid))} MiB; DP RSS ${(await Promise.all(dps.map(({ dp }) => rssMiB(dp.process.pid)))).map(Math.round).join(', ')} MiB`,
    );
    for (const { dp } of dps) await dp.stop();
  } finally {
    await cp.dispose();
    await Promise.allSettled(upstreams.map((u) => u.close()));
  }
}
