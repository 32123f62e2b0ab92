/**
 * Gatehouse on a real node (scripts/test-cluster.sh): `helm install` with default values (only the
 * image set), then the commands of NOTES.txt and README "Run on Kubernetes" as a platform team runs
 * them, from inside the node's network namespace: the admin password from its Secret, a login through
 * the control plane's Service, an API whose target is an upstream Service, called through the data
 * plane's Service by ClusterIP and by NodePort. Then day two on the same release: scaling by hand and by
 * the chart's HPA (metrics-server runs on the node), the leader's loss, an upgrade, a restart without a
 * control plane, bad input, uninstall.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { httpRequest, type HttpResponse } from '../helpers/http-request.js';
import { pollUntil } from '../helpers/poll-until.js';
import { CHART_DIR } from '../helpers/helm.js';
import { startLoad, stopAllLoads, type LoadResult } from '../helpers/load-generator.js';
import { forwardIntoNode, helm, kubectl, kubectlOk, nodeUnavailable, testNode, type NodeForward, type TestNode } from '../helpers/test-node.js';

// A test that fails while its load runs must not leave the load running into the next ones.
afterEach(stopAllLoads);

const NS = 'gatehouse';
const RELEASE = 'gatehouse';
const UPSTREAM_NS = 'shop';
const unavailable = nodeUnavailable();

interface PodStatus {
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string>; deletionTimestamp?: string };
  status: { podIP?: string; conditions?: { type: string; status: string }[]; containerStatuses?: { restartCount: number }[] };
}

function isReady(pod: PodStatus): boolean {
  return pod.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

async function pods(namespace: string, selector: string): Promise<PodStatus[]> {
  return (JSON.parse(await kubectlOk(['-n', namespace, 'get', 'pods', '-l', selector, '-o', 'json'])) as { items: PodStatus[] }).items;
}

async function clusterIp(namespace: string, service: string): Promise<string> {
  return kubectlOk(['-n', namespace, 'get', 'svc', service, '-o', 'jsonpath={.spec.clusterIP}']);
}

const upstreamManifest = (image: string): string => `
apiVersion: v1
kind: Namespace
metadata: { name: ${UPSTREAM_NS} }
---
apiVersion: apps/v1
kind: Deployment
metadata: { name: orders, namespace: ${UPSTREAM_NS} }
spec:
  replicas: 1
  selector: { matchLabels: { app: orders } }
  template:
    metadata: { labels: { app: orders } }
    spec:
      containers:
      - name: upstream
        image: ${image}
        imagePullPolicy: Never
        ports: [{ containerPort: 8080 }]
        readinessProbe: { httpGet: { path: /, port: 8080 }, periodSeconds: 1 }
---
apiVersion: v1
kind: Service
metadata: { name: orders, namespace: ${UPSTREAM_NS} }
spec:
  selector: { app: orders }
  ports: [{ port: 8080, targetPort: 8080 }]
`;

/** What `helm install` took until every CP and DP pod was Ready, for the README's figures. */
let installToReadyMs = 0;
/** The release's pods right after install. */
let installedCp: PodStatus[] = [];
let installedDp: PodStatus[] = [];
let node: TestNode;
const forwards: NodeForward[] = [];

async function forward(host: string, port: number): Promise<NodeForward> {
  const f = await forwardIntoNode(host, port);
  forwards.push(f);
  return f;
}

if (unavailable && process.env.CI === 'true') {
  test('the test node can run here', () => {
    throw new Error(`the cluster tests cannot run: ${unavailable}`);
  });
}

function expectUpstreamAnswer(res: HttpResponse): void {
  const body = res.json as { host: string; url: string };
  // The upstream pod answered (its name is the host), with the listen path stripped.
  expect(body.host).toMatch(/^orders-/);
  expect(body.url).toBe('/42');
}

// --- shared by the scenarios below ------------------------------------------------------------------

async function adminToken(): Promise<{ token: string; admin: NodeForward }> {
  const password = Buffer.from(await kubectlOk(['-n', NS, 'get', 'secret', `${RELEASE}-admin`, '-o', 'jsonpath={.data.password}']), 'base64').toString('utf8');
  const admin = await forward(await clusterIp(NS, `${RELEASE}-control-plane`), 8081);
  // Retried: after a rollout the Service may still send a connection to a control-plane pod that is going away.
  const login = await pollUntil(
    async () => {
      const answer = await httpRequest('http://gatehouse-control-plane:8081/login', {
        method: 'POST',
        socketPath: admin.socketPath,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: 'admin', password }),
      });
      if (answer.status !== 200) throw new Error(`login: ${answer.status} ${answer.text}`);
      return answer;
    },
    { what: 'an admin login through the control-plane Service', timeoutMs: 60_000, intervalMs: 500 },
  );
  return { token: (login.json as { access_token: string }).access_token, admin };
}

/** The data planes every control-plane replica reports connected (each knows only its own streams). */
async function connectedDataPlanes(token: string): Promise<string[]> {
  const hostnames: string[] = [];
  // Every running replica, a terminating one too: a data plane stays on its stream until that replica has gone.
  for (const cp of (await pods(NS, 'app.kubernetes.io/component=control-plane')).filter((p) => p.status.podIP)) {
    const f = await forward(cp.status.podIP!, 8081);
    const res = await httpRequest('http://cp/dataplanes', { socketPath: f.socketPath, headers: { authorization: `Bearer ${token}` } }).catch((err: Error) => ({
      status: 0,
      text: err.message,
      json: [],
    }));
    // A replica on its way out may have stopped answering; a Ready one must answer.
    if (res.status !== 200 && !isReady(cp)) continue;
    if (res.status !== 200) throw new Error(`GET /dataplanes on ${cp.metadata.name}: ${res.status} ${res.text}`);
    const body = res.json as { hostname: string }[] | { items: { hostname: string }[] };
    hostnames.push(...(Array.isArray(body) ? body : body.items).map((d) => d.hostname));
  }
  return hostnames.sort();
}

async function readyDataPlanes(): Promise<PodStatus[]> {
  return (await pods(NS, 'app.kubernetes.io/component=data-plane')).filter((p) => isReady(p) && !p.metadata.deletionTimestamp);
}

/** gatehouse_proxy_requests_total of one data-plane pod, from its status port. */
async function proxiedCount(pod: PodStatus): Promise<number> {
  const f = await forward(pod.status.podIP!, 8083);
  const res = await httpRequest('http://dp/metrics', { socketPath: f.socketPath });
  return res.text
    .split('\n')
    .filter((line) => line.startsWith('gatehouse_proxy_requests_total'))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
}

/** Makes sure the API `load` (/load/* to the upstream) exists and answers through the data-plane Service. */
async function loadApiThroughService(token: string, admin: NodeForward): Promise<{ dpIp: string; dp: NodeForward }> {
  const res = await httpRequest('http://cp/apis', {
    method: 'POST',
    socketPath: admin.socketPath,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({
      name: 'load',
      proxy: { listen_path: '/load/*', strip_path: true, upstreams: { targets: [{ target: `http://orders.${UPSTREAM_NS}.svc:8080` }] } },
    }),
  });
  if (res.status !== 201 && res.status !== 409) throw new Error(`POST /apis: ${res.status} ${res.text}`);
  const dpIp = await clusterIp(NS, `${RELEASE}-data-plane`);
  const dp = await forward(dpIp, 80);
  await pollUntil(async () => ((await httpRequest(`http://${dpIp}/load/1`, { socketPath: dp.socketPath })).status === 200 ? true : undefined), {
    what: 'GET /load/1 through the data-plane Service',
    timeoutMs: 30_000,
    intervalMs: 250,
  });
  return { dpIp, dp };
}

async function rollout(kind: string): Promise<void> {
  const res = await kubectl(['-n', NS, 'rollout', 'status', `deployment/${RELEASE}-${kind}`, '--timeout=180s'], { timeoutMs: 200_000 });
  if (res.code !== 0) throw new Error(`rollout of ${kind}: ${res.stderr}`);
}

function expectNoFailures(result: LoadResult, what: string): void {
  console.log(`${what}: ${result.ok} answered, ${result.failed} failed in ${(result.elapsedMs / 1000).toFixed(1)} s`);
  expect({ failed: result.failed, failures: result.failures }).toEqual({ failed: 0, failures: [] });
  expect(result.ok).toBeGreaterThan(50);
}

/**
 * `helm install` with default values (only the image set), then the wait commands of docs/kubernetes.md as written;
 * resolves with the milliseconds from install to every pod Ready.
 */
async function installRelease(): Promise<number> {
  const [repository, tag] = [
    node.gatehouseImage.slice(0, node.gatehouseImage.lastIndexOf(':')),
    node.gatehouseImage.slice(node.gatehouseImage.lastIndexOf(':') + 1),
  ];
  const started = Date.now();
  const install = await helm(
    ['install', RELEASE, CHART_DIR, '-n', NS, '--set', `image.repository=${repository}`, '--set', `image.tag=${tag}`, '--set', 'image.pullPolicy=Never'],
    { timeoutMs: 120_000 },
  );
  if (install.code !== 0) throw new Error(`helm install failed: ${install.stderr}`);
  // The wait commands of docs/kubernetes.md, as written: the Deployments Available, then the data planes at the
  // HPA's minimum (the Deployment starts at one and the HPA raises it).
  const wait = await kubectl(['-n', NS, 'wait', '--for=condition=Available', 'deployment', '--all', '--timeout=3m'], { timeoutMs: 200_000 });
  if (wait.code !== 0) {
    const describePods = await kubectl(['-n', NS, 'describe', 'pods']);
    throw new Error(`deployments not Available: ${wait.stderr}\n${describePods.stdout.slice(-6000)}`);
  }
  const minimum = await kubectl(['-n', NS, 'wait', '--for=jsonpath={.status.readyReplicas}=2', `deployment/${RELEASE}-data-plane`, '--timeout=3m'], {
    timeoutMs: 200_000,
  });
  if (minimum.code !== 0) throw new Error(`data planes not at the HPA minimum: ${minimum.stderr}`);
  return Date.now() - started;
}

(unavailable ? describe.skip : describe)('Gatehouse on a one-node cluster', () => {
  beforeAll(async () => {
    const t0 = Date.now();
    node = await testNode();
    console.log(`test node up, images loaded: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    // A node reused from an earlier run: start from no release (the CRDs stay, as helm leaves them).
    await helm(['uninstall', RELEASE, '-n', NS, '--wait'], { timeoutMs: 120_000 });
    await kubectl(['delete', 'namespace', NS, UPSTREAM_NS, '--ignore-not-found', '--wait=true', '--timeout=120s'], { timeoutMs: 150_000 });

    console.log(`earlier release removed: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    await kubectlOk(['apply', '-f', '-'], { input: upstreamManifest(node.upstreamImage) });
    await kubectlOk(['create', 'namespace', NS]);
    installToReadyMs = await installRelease();
    installedCp = await pods(NS, 'app.kubernetes.io/component=control-plane');
    installedDp = await pods(NS, 'app.kubernetes.io/component=data-plane');
    console.log(`helm install → every pod Ready: ${(installToReadyMs / 1000).toFixed(1)} s`);
    const upstream = await kubectl(['-n', UPSTREAM_NS, 'rollout', 'status', 'deployment/orders', '--timeout=120s'], { timeoutMs: 150_000 });
    if (upstream.code !== 0) throw new Error(`upstream not ready: ${upstream.stderr}`);
  }, 900_000);

  afterAll(async () => {
    await Promise.all(forwards.map((f) => f.close()));
    // The suites after this one get the machine back: no release left running on the node.
    if (node) {
      await helm(['uninstall', RELEASE, '-n', NS, '--wait=false'], { timeoutMs: 60_000 });
      await kubectl(['delete', 'namespace', NS, UPSTREAM_NS, '--ignore-not-found', '--wait=false'], { timeoutMs: 60_000 });
    }
  }, 150_000);

  test('every control-plane and data-plane pod of a default install is Ready', async () => {
    const [cp, dp] = [installedCp, installedDp];
    expect(cp.map((p) => [p.metadata.name, isReady(p)])).toEqual(cp.map((p) => [p.metadata.name, true]));
    expect(dp.map((p) => [p.metadata.name, isReady(p)])).toEqual(dp.map((p) => [p.metadata.name, true]));
    // The chart's defaults: 2 control-plane replicas, 2 data planes (the HPA's minimum).
    expect(cp).toHaveLength(2);
    expect(dp).toHaveLength(2);
    expect(installToReadyMs).toBeGreaterThan(0);
  }, 60_000);

  test('the control planes serve the snapshot stream over mutual TLS; every pod’s Prometheus annotations name a /metrics that answers', async () => {
    const cps = (await pods(NS, 'app.kubernetes.io/component=control-plane')).filter((p) => isReady(p) && !p.metadata.deletionTimestamp);
    expect(cps.length).toBeGreaterThan(0);
    for (const cp of cps) {
      const listening = (await kubectlOk(['-n', NS, 'logs', cp.metadata.name]))
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as { msg?: string; listener?: string; tls?: boolean; dataPlaneAuth?: string })
        .find((l) => l.msg === 'listening' && l.listener === 'grpc');
      expect({ pod: cp.metadata.name, tls: listening?.tls, dataPlaneAuth: listening?.dataPlaneAuth }).toEqual({
        pod: cp.metadata.name,
        tls: true,
        dataPlaneAuth: 'mtls',
      });
    }
    for (const pod of [...cps, ...(await readyDataPlanes())]) {
      const annotations = pod.metadata.annotations ?? {};
      expect(annotations['prometheus.io/scrape']).toBe('true');
      const f = await forward(pod.status.podIP!, Number(annotations['prometheus.io/port']));
      const res = await httpRequest(`http://pod${annotations['prometheus.io/path']}`, { socketPath: f.socketPath });
      expect({ pod: pod.metadata.name, status: res.status, snapshotVersion: res.text.includes('gatehouse_snapshot_version') }).toEqual({
        pod: pod.metadata.name,
        status: 200,
        snapshotVersion: true,
      });
    }
  }, 60_000);

  test('NOTES.txt: the Secret’s password logs in through the CP Service; an API to an upstream Service answers through the DP Service by ClusterIP and NodePort', async () => {
    // 1. The admin password, as NOTES.txt reads it.
    const encoded = await kubectlOk(['-n', NS, 'get', 'secret', `${RELEASE}-admin`, '-o', 'jsonpath={.data.password}']);
    const password = Buffer.from(encoded, 'base64').toString('utf8');
    expect(password.length).toBeGreaterThanOrEqual(16);

    // 2. Log in through the control plane's Service.
    const admin = await forward(await clusterIp(NS, `${RELEASE}-control-plane`), 8081);
    const adminUrl = 'http://gatehouse-control-plane:8081';
    const login = await httpRequest(`${adminUrl}/login`, {
      method: 'POST',
      socketPath: admin.socketPath,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'admin', password }),
    });
    expect(login.status).toBe(200);
    const token = (login.json as { access_token: string }).access_token;
    expect(token).toEqual(expect.any(String));

    // 3. An API whose target is the upstream Service, by its cluster DNS name.
    const created = await httpRequest(`${adminUrl}/apis`, {
      method: 'POST',
      socketPath: admin.socketPath,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({
        name: 'orders',
        proxy: { listen_path: '/orders/*', strip_path: true, upstreams: { targets: [{ target: `http://orders.${UPSTREAM_NS}.svc:8080` }] } },
      }),
    });
    expect(created.status).toBe(201);

    // 4. Through the data planes' Service by its ClusterIP: every data plane gets the API.
    const dpIp = await clusterIp(NS, `${RELEASE}-data-plane`);
    const byClusterIp = await forward(dpIp, 80);
    const answer = await pollUntil(
      async () => {
        const res = await httpRequest(`http://${dpIp}/orders/42`, { socketPath: byClusterIp.socketPath });
        return res.status === 200 ? res : undefined;
      },
      { what: 'GET /orders/42 through the data-plane Service', timeoutMs: 30_000, intervalMs: 250 },
    );
    expectUpstreamAnswer(answer);

    // By NodePort, on the node's address as NOTES.txt finds them, once the Service is a NodePort one.
    const upgrade = await helm(['upgrade', RELEASE, CHART_DIR, '-n', NS, '--reuse-values', '--set', 'dataPlane.service.type=NodePort'], { timeoutMs: 120_000 });
    expect(upgrade.stderr).toBe('');
    expect(upgrade.code).toBe(0);
    const nodePort = Number(await kubectlOk(['-n', NS, 'get', 'svc', `${RELEASE}-data-plane`, '-o', 'jsonpath={.spec.ports[0].nodePort}']));
    const nodeIp = await kubectlOk(['get', 'nodes', '-o', 'jsonpath={.items[0].status.addresses[0].address}']);
    expect(nodePort).toBeGreaterThanOrEqual(30000);
    const byNodePort = await forward(nodeIp, nodePort);
    const viaNodePort = await pollUntil(
      async () => {
        const res = await httpRequest(`http://${nodeIp}:${nodePort}/orders/42`, { socketPath: byNodePort.socketPath });
        return res.status === 200 ? res : undefined;
      },
      { what: `GET /orders/42 on NodePort ${nodeIp}:${nodePort}`, timeoutMs: 30_000, intervalMs: 250 },
    );
    expectUpstreamAnswer(viaNodePort);
  }, 180_000);

  test('an ApiDefinition applied with kubectl reaches Programmed and is served through the data-plane Service', async () => {
    const apply = await kubectl(['apply', '-n', NS, '-f', '-'], {
      input: `apiVersion: gatehouse.dev/v1alpha1
kind: ApiDefinition
metadata: { name: payments }
spec:
  proxy: { listen_path: /payments/*, strip_path: true, upstreams: { targets: [ { target: "http://orders.${UPSTREAM_NS}.svc:8080" } ] } }
`,
    });
    expect(apply.stderr).toBe('');
    expect(apply.code).toBe(0);
    const wait = await kubectl(['-n', NS, 'wait', '--for=condition=Programmed', 'apidefinition/payments', '--timeout=60s'], { timeoutMs: 70_000 });
    expect(wait.stderr).toBe('');
    expect(wait.code).toBe(0);
    // The columns README shows: ACCEPTED and PROGRAMMED both True.
    const row = await kubectlOk(['-n', NS, 'get', 'ghapi', 'payments', '--no-headers']);
    expect(row).toMatch(/\/payments\/\*\s+http:\/\/orders\.shop\.svc:8080\s+True\s+True/);

    // Programmed means every connected data plane serves it: they are the Ready data-plane pods (once a data plane
    // the HPA is adding or removing meanwhile is through).
    const { token } = await adminToken();
    const ready = async () => (await readyDataPlanes()).map((p) => p.metadata.name).sort();
    await pollUntil(async () => (JSON.stringify(await connectedDataPlanes(token)) === JSON.stringify(await ready()) ? true : undefined), {
      what: 'the connected data planes to be the Ready data-plane pods',
      timeoutMs: 30_000,
      intervalMs: 500,
    });
    const dpIp = await clusterIp(NS, `${RELEASE}-data-plane`);
    const dp = await forward(dpIp, 80);
    const res = await httpRequest(`http://${dpIp}/payments/7`, { socketPath: dp.socketPath });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ url: '/7' });
  }, 120_000);

  test('kubectl scale of the data planes 1 → 3 reaches every pod; 3 → 1 under constant load fails no request', async () => {
    const { token, admin } = await adminToken();
    // A fixed count: the HPA would otherwise put its minimum back.
    const fixed = await helm(
      ['upgrade', RELEASE, CHART_DIR, '-n', NS, '--reuse-values', '--set', 'dataPlane.autoscaling.enabled=false', '--set', 'dataPlane.replicas=1'],
      { timeoutMs: 120_000 },
    );
    expect(fixed.code).toBe(0);
    await rollout('data-plane');
    await pollUntil(
      async () => ((await readyDataPlanes()).length === 1 && (await pods(NS, 'app.kubernetes.io/component=data-plane')).length === 1 ? true : undefined),
      {
        what: 'one data plane',
        timeoutMs: 90_000,
        intervalMs: 500,
      },
    );
    const { dpIp, dp } = await loadApiThroughService(token, admin);

    await kubectlOk(['-n', NS, 'scale', `deployment/${RELEASE}-data-plane`, '--replicas=3']);
    await rollout('data-plane');
    const three = await readyDataPlanes();
    expect(three).toHaveLength(3);
    let listed: string[] = [];
    await pollUntil(
      async () => {
        listed = await connectedDataPlanes(token);
        return listed.length === 3 ? true : undefined;
      },
      {
        what: '/dataplanes listing 3',
        timeoutMs: 60_000,
        intervalMs: 500,
        details: () => `listed: ${listed.join(', ')}; Ready: ${three.map((p) => p.metadata.name).join(', ')}`,
      },
    );
    expect(await connectedDataPlanes(token)).toEqual(three.map((p) => p.metadata.name).sort());
    // Fresh connections through the Service spread over the endpoints: every pod proxies some (once kube-proxy has
    // the new endpoints in its rules, which may trail the pods' readiness by a few seconds).
    const before = await Promise.all(three.map(proxiedCount));
    let after: number[] = [];
    await pollUntil(
      async () => {
        for (let i = 0; i < 30; i++) {
          const res = await httpRequest(`http://${dpIp}/load/${i}`, { socketPath: dp.socketPath });
          expect(res.status).toBe(200);
        }
        after = await Promise.all(three.map(proxiedCount));
        return after.every((n, i) => n > before[i]!) ? true : undefined;
      },
      {
        what: 'every data plane proxying requests sent through the Service',
        timeoutMs: 60_000,
        intervalMs: 500,
        details: () => `proxied before: ${before.join(', ')}; after: ${after.join(', ')}`,
      },
    );

    const load = startLoad({ origin: `http://${dpIp}`, path: '/load/load', socketPath: dp.socketPath, concurrency: 8 });
    await new Promise((r) => setTimeout(r, 2_000));
    await kubectlOk(['-n', NS, 'scale', `deployment/${RELEASE}-data-plane`, '--replicas=1']);
    await pollUntil(async () => ((await pods(NS, 'app.kubernetes.io/component=data-plane')).length === 1 ? true : undefined), {
      what: 'the two scaled-down data planes gone',
      timeoutMs: 90_000,
      intervalMs: 500,
    });
    await new Promise((r) => setTimeout(r, 2_000));
    expectNoFailures(await load.stop(), 'scale 3 → 1');
  }, 300_000);

  test('with metrics-server, the chart’s HPA scales the data planes up under load and back to its minimum after it', async () => {
    const { token, admin } = await adminToken();
    const userValues = async () => JSON.parse((await helm(['get', 'values', RELEASE, '-n', NS, '-o', 'json'])).stdout) ?? {};
    const before = await userValues();
    // The chart's minimum (2) with a low CPU target and a short scale-down window, so both happen within the test.
    const behavior = { scaleDown: { stabilizationWindowSeconds: 10, policies: [{ type: 'Percent', value: 100, periodSeconds: 15 }] } };
    const tuned = await helm(
      [
        'upgrade',
        RELEASE,
        CHART_DIR,
        '-n',
        NS,
        '--reuse-values',
        '--set',
        'dataPlane.autoscaling.enabled=true,dataPlane.autoscaling.minReplicas=2,dataPlane.autoscaling.maxReplicas=3',
        '--set',
        'dataPlane.autoscaling.targetCPUUtilizationPercentage=20',
        '--set-json',
        `dataPlane.autoscaling.behavior=${JSON.stringify(behavior)}`,
      ],
      { timeoutMs: 120_000 },
    );
    expect(tuned.stderr).toBe('');
    expect(tuned.code).toBe(0);
    const hpaName = `${RELEASE}-data-plane`;
    const hpa = async () =>
      JSON.parse(await kubectlOk(['-n', NS, 'get', 'hpa', hpaName, '-o', 'json'])) as {
        spec: { behavior?: unknown };
        status: { currentMetrics?: { resource?: { current?: { averageUtilization?: number } } }[] };
      };
    try {
      const dpReplicas = async () => Number(await kubectlOk(['-n', NS, 'get', 'deployment', hpaName, '-o', 'jsonpath={.spec.replicas}']));
      expect((await hpa()).spec.behavior).toMatchObject(behavior);
      const { dpIp, dp } = await loadApiThroughService(token, admin);
      // At rest: two Ready data planes, the HPA reading their CPU (from metrics-server) below the target.
      await pollUntil(
        async () => {
          const { status } = await hpa();
          const utilization = status.currentMetrics?.[0]?.resource?.current?.averageUtilization;
          return (await dpReplicas()) === 2 && (await readyDataPlanes()).length === 2 && utilization !== undefined && utilization < 20 ? true : undefined;
        },
        { what: 'two data planes at rest, their CPU read by the HPA', timeoutMs: 120_000, intervalMs: 1_000 },
      );
      // kubectl top reads the same metrics.k8s.io API.
      const top = await kubectlOk(['-n', NS, 'top', 'pods', '-l', 'app.kubernetes.io/component=data-plane', '--no-headers']);
      expect(top.trim().split('\n')).toEqual(expect.arrayContaining([expect.stringMatching(new RegExp(`^${hpaName}-\\S+\\s+\\d+m\\s+\\d+Mi$`))]));

      const load = startLoad({ origin: `http://${dpIp}`, path: '/load/hpa', socketPath: dp.socketPath, concurrency: 8 });
      const loadStarted = Date.now();
      let result: LoadResult;
      let upMs: number;
      try {
        await pollUntil(async () => ((await readyDataPlanes()).length > 2 ? true : undefined), {
          what: 'a third data plane Ready under load',
          timeoutMs: 120_000,
          intervalMs: 500,
        });
        upMs = Date.now() - loadStarted;
      } finally {
        result = await load.stop();
      }
      const loadStopped = Date.now();
      await pollUntil(async () => ((await dpReplicas()) === 2 && (await readyDataPlanes()).length === 2 ? true : undefined), {
        what: 'the data planes back at the HPA minimum (2)',
        timeoutMs: 120_000,
        intervalMs: 500,
      });
      const downMs = Date.now() - loadStopped;
      console.log(
        `HPA (target 20% CPU, scale-down window 10 s): load start → 3 data planes Ready ${(upMs / 1000).toFixed(1)} s; load stop → back to 2 ${(downMs / 1000).toFixed(1)} s`,
      );
      expectNoFailures(result, 'HPA scale-up');
    } finally {
      // The release's values as they were (--reuse-values would keep the behavior map: a value file replaces them).
      const restored = await helm(['upgrade', RELEASE, CHART_DIR, '-n', NS, '-f', '-'], { input: JSON.stringify(before), timeoutMs: 120_000 });
      expect(restored.code).toBe(0);
      expect(await userValues()).toEqual(before);
      expect(await kubectlOk(['-n', NS, 'get', 'hpa', '--ignore-not-found', '-o', 'jsonpath={.items[*].spec.behavior}'])).toBe('');
    }
  }, 360_000);

  test('deleting the control-plane leader under constant load fails no request, and another replica leads within the lease duration', async () => {
    const { token, admin } = await adminToken();
    const { dpIp, dp } = await loadApiThroughService(token, admin);
    // The leader's Lease, not a replica's data-plane report Lease (those carry its name as holder too); after a
    // control-plane restart it may be between holders for a moment.
    const lease = await pollUntil(
      async () => {
        const leases = JSON.parse(await kubectlOk(['-n', NS, 'get', 'leases', '-l', '!gatehouse.dev/dataplane-report', '-o', 'json'])) as {
          items: { metadata: { name: string }; spec: { holderIdentity?: string; leaseDurationSeconds?: number } }[];
        };
        const cpPods = (await pods(NS, 'app.kubernetes.io/component=control-plane')).map((p) => p.metadata.name);
        return leases.items.find((l) => cpPods.includes(l.spec.holderIdentity ?? ''));
      },
      { what: 'a control-plane replica holding the leader Lease', timeoutMs: 30_000, intervalMs: 500 },
    );
    const leader = lease.spec.holderIdentity!;
    const durationMs = (lease.spec.leaseDurationSeconds ?? 15) * 1000;

    const load = startLoad({ origin: `http://${dpIp}`, path: '/load/leader', socketPath: dp.socketPath, concurrency: 8 });
    await new Promise((r) => setTimeout(r, 1_000));
    const deleted = Date.now();
    await kubectlOk(['-n', NS, 'delete', 'pod', leader, '--wait=false']);
    const next = await pollUntil(
      async () => {
        const holder = await kubectlOk(['-n', NS, 'get', 'lease', lease.metadata.name, '-o', 'jsonpath={.spec.holderIdentity}']);
        return holder && holder !== leader ? holder : undefined;
      },
      { what: `a leader other than ${leader}`, timeoutMs: durationMs + 30_000, intervalMs: 250 },
    );
    const takeoverMs = Date.now() - deleted;
    console.log(`leader ${leader} deleted → ${next} leads after ${(takeoverMs / 1000).toFixed(1)} s`);
    expect(takeoverMs).toBeLessThanOrEqual(durationMs);
    await new Promise((r) => setTimeout(r, 2_000));
    expectNoFailures(await load.stop(), 'leader deletion');
    await rollout('control-plane');
  }, 180_000);

  test('helm upgrade with one changed value rolls the data planes with no failed request', async () => {
    const { token, admin } = await adminToken();
    const { dpIp, dp } = await loadApiThroughService(token, admin);
    const before = (await readyDataPlanes()).map((p) => p.metadata.name);
    const load = startLoad({ origin: `http://${dpIp}`, path: '/load/upgrade', socketPath: dp.socketPath, concurrency: 8 });
    await new Promise((r) => setTimeout(r, 1_000));
    const level = Math.random() < 0.5 ? 'debug' : 'warn';
    const upgrade = await helm(['upgrade', RELEASE, CHART_DIR, '-n', NS, '--reuse-values', '--set', `dataPlane.logLevel=${level}`], { timeoutMs: 120_000 });
    expect(upgrade.code).toBe(0);
    await rollout('data-plane');
    await pollUntil(
      async () => ((await pods(NS, 'app.kubernetes.io/component=data-plane')).every((p) => !before.includes(p.metadata.name)) ? true : undefined),
      {
        what: 'every old data plane gone',
        timeoutMs: 90_000,
        intervalMs: 500,
      },
    );
    await new Promise((r) => setTimeout(r, 2_000));
    expectNoFailures(await load.stop(), 'helm upgrade');
  }, 300_000);

  test('a data-plane container restarted while no control plane is Ready serves from its snapshot cache', async () => {
    const { token, admin } = await adminToken();
    await loadApiThroughService(token, admin);
    const [pod] = await readyDataPlanes();
    expect(pod).toBeDefined();
    // The pod itself serves the API (its snapshot holds it; SIGTERM writes the cache before the exit).
    const direct = await forward(pod!.status.podIP!, 8080);
    await pollUntil(
      async () => ((await httpRequest(`http://${pod!.status.podIP}:8080/load/1`, { socketPath: direct.socketPath })).status === 200 ? true : undefined),
      {
        what: `GET /load/1 on ${pod!.metadata.name}`,
        timeoutMs: 30_000,
        intervalMs: 250,
      },
    );
    const status = await forward(pod!.status.podIP!, 8083);
    const served = (await httpRequest('http://dp/readyz', { socketPath: status.socketPath })).json as { version: number; hash: string };
    const restarts = pod!.status.containerStatuses?.[0]?.restartCount ?? 0;
    const cp = `deployment/${RELEASE}-control-plane`;
    await kubectlOk(['-n', NS, 'scale', cp, '--replicas=0']);
    try {
      await pollUntil(async () => ((await pods(NS, 'app.kubernetes.io/component=control-plane')).length === 0 ? true : undefined), {
        what: 'no control-plane pod',
        timeoutMs: 60_000,
        intervalMs: 500,
      });
      // SIGTERM to the container's init (tini forwards it): the data plane exits 0, the kubelet starts it again in
      // the same pod, with the same snapshot-cache emptyDir.
      await kubectlOk(['-n', NS, 'exec', pod!.metadata.name, '-c', 'data-plane', '--', 'sh', '-c', 'kill 1']);
      const restarted = await pollUntil(
        async () => {
          const [now] = (await pods(NS, 'app.kubernetes.io/component=data-plane')).filter((p) => p.metadata.name === pod!.metadata.name);
          return now && (now.status.containerStatuses?.[0]?.restartCount ?? 0) > restarts && isReady(now) ? now : undefined;
        },
        { what: `${pod!.metadata.name} restarted and Ready`, timeoutMs: 90_000, intervalMs: 500 },
      );
      const f = await forward(restarted.status.podIP!, 8080);
      const res = await httpRequest(`http://${restarted.status.podIP}:8080/load/cached`, { socketPath: f.socketPath });
      expect(res.status).toBe(200);
      expect(res.json).toMatchObject({ url: '/cached' });
      // Ready with the snapshot it served before, no control plane having answered since.
      const readyz = await httpRequest('http://dp/readyz', { socketPath: (await forward(restarted.status.podIP!, 8083)).socketPath });
      expect([readyz.status, readyz.json]).toEqual([200, { ready: true, version: served.version, hash: served.hash }]);
    } finally {
      await kubectlOk(['-n', NS, 'scale', cp, '--replicas=2']);
      await rollout('control-plane');
    }
  }, 240_000);

  test('a data plane pointed at a wrong control-plane address never becomes Ready; its /readyz says why, without the join token', async () => {
    // The chart's own data-plane Deployment, under other labels (no Service or HPA selects it), with the address wrong.
    const chart = JSON.parse(await kubectlOk(['-n', NS, 'get', 'deployment', `${RELEASE}-data-plane`, '-o', 'json'])) as {
      spec: { template: { metadata: { labels: Record<string, string> }; spec: { containers: { env: { name: string; value?: string }[] }[] } } };
    };
    const wrongAddr = `nowhere.${NS}.svc.cluster.local:8082`;
    const template = chart.spec.template;
    template.metadata.labels = { app: 'misdirected-data-plane' };
    for (const env of template.spec.containers[0]!.env) if (env.name === 'CONTROL_PLANE_ADDR') env.value = wrongAddr;
    const deployment = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'misdirected-data-plane', namespace: NS },
      spec: { replicas: 1, selector: { matchLabels: template.metadata.labels }, template },
    };
    await kubectl(['-n', NS, 'delete', 'deployment', 'misdirected-data-plane', '--ignore-not-found', '--wait=true']);
    await kubectlOk(['apply', '-f', '-'], { input: JSON.stringify(deployment) });
    try {
      const running = await pollUntil(
        async () => (await pods(NS, 'app=misdirected-data-plane')).find((p) => p.status.podIP && p.status.containerStatuses?.length),
        { what: 'the misdirected data plane running', timeoutMs: 60_000, intervalMs: 500 },
      );
      // Three readiness periods (5 s each) without becoming Ready.
      await new Promise((r) => setTimeout(r, 16_000));
      const [pod] = await pods(NS, 'app=misdirected-data-plane');
      expect(pod && isReady(pod)).toBe(false);
      const f = await forward(running.status.podIP!, 8083);
      const readyz = await httpRequest('http://dp/readyz', { socketPath: f.socketPath });
      expect(readyz.status).toBe(503);
      // The address and the last attempt's error (here the cluster DNS's answer: no such name).
      expect(readyz.json).toEqual({ ready: false, reason: expect.stringContaining(`no snapshot yet: control plane ${wrongAddr} unreachable (`) });
      const joinToken = Buffer.from(
        await kubectlOk(['-n', NS, 'get', 'secret', `${RELEASE}-join-token`, '-o', 'jsonpath={.data.join-token}']),
        'base64',
      ).toString('utf8');
      expect(joinToken.length).toBeGreaterThanOrEqual(16);
      expect(readyz.text).not.toContain(joinToken);
    } finally {
      await kubectl(['-n', NS, 'delete', 'deployment', 'misdirected-data-plane', '--wait=false']);
    }
  }, 120_000);

  test('a values file that breaks values.schema.json fails helm install, naming the field', async () => {
    const res = await helm(['install', 'broken', CHART_DIR, '-n', NS, '--set', 'controlPlane.replicas=two', '--dry-run=server'], { timeoutMs: 60_000 });
    expect(res.code).not.toBe(0);
    expect(res.stderr).toMatch(/controlPlane\.replicas|controlPlane.*replicas/);
  }, 60_000);

  test('helm uninstall keeps the CRDs and the custom resources', async () => {
    await kubectlOk(['apply', '-n', NS, '-f', '-'], {
      input: `apiVersion: gatehouse.dev/v1alpha1
kind: ApiDefinition
metadata: { name: kept }
spec:
  proxy: { listen_path: /kept/*, upstreams: { targets: [ { target: "http://orders.${UPSTREAM_NS}.svc:8080" } ] } }
`,
    });
    const names = async () => (await kubectlOk(['-n', NS, 'get', 'apidefinitions', '-o', 'jsonpath={.items[*].metadata.name}'])).split(' ').sort();
    const before = await names();
    expect(before).toContain('kept');
    const uninstall = await helm(['uninstall', RELEASE, '-n', NS, '--wait'], { timeoutMs: 120_000 });
    expect(uninstall.code).toBe(0);
    try {
      // Its pods go within their grace period.
      await pollUntil(async () => ((await pods(NS, `app.kubernetes.io/instance=${RELEASE}`)).length === 0 ? true : undefined), {
        what: 'no pod of the release',
        timeoutMs: 90_000,
        intervalMs: 500,
      });
      const crds = (await kubectlOk(['get', 'crd', '-o', 'jsonpath={.items[*].metadata.name}'])).split(' ');
      for (const crd of ['apidefinitions', 'basicauthcredentials', 'keyauthcredentials', 'oauthservers']) expect(crds).toContain(`${crd}.gatehouse.dev`);
      expect(await names()).toEqual(before);
    } finally {
      // The other tests (in any order) find the release again; the CRs are its configuration.
      await installRelease();
    }
  }, 400_000);
});
