/**
 * Gatehouse on a real node (scripts/test-cluster.sh): `helm install` with default values (only the
 * image set), then the commands of NOTES.txt and README "Run on Kubernetes" as a platform team runs
 * them, from inside the node's network namespace: the admin password from its Secret, a login through
 * the control plane's Service, an API whose target is an upstream Service, called through the data
 * plane's Service by ClusterIP and by NodePort.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { httpRequest, type HttpResponse } from '../helpers/http-request.js';
import { pollUntil } from '../helpers/poll-until.js';
import { CHART_DIR } from '../helpers/helm.js';
import { forwardIntoNode, helm, kubectl, kubectlOk, nodeUnavailable, testNode, type NodeForward, type TestNode } from '../helpers/test-node.js';

const NS = 'gatehouse';
const RELEASE = 'gatehouse';
const UPSTREAM_NS = 'shop';
const unavailable = nodeUnavailable();

interface PodStatus {
  metadata: { name: string; labels?: Record<string, string> };
  status: { conditions?: { type: string; status: string }[]; containerStatuses?: { restartCount: number }[] };
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

(unavailable ? describe.skip : describe)('helm install on a one-node cluster', () => {
  beforeAll(async () => {
    node = await testNode();
    // A node reused from an earlier run: start from no release (the CRDs stay, as helm leaves them).
    await helm(['uninstall', RELEASE, '-n', NS, '--wait'], { timeoutMs: 120_000 });
    await kubectl(['delete', 'namespace', NS, UPSTREAM_NS, '--ignore-not-found', '--wait=true', '--timeout=120s'], { timeoutMs: 150_000 });

    await kubectlOk(['apply', '-f', '-'], { input: upstreamManifest(node.upstreamImage) });
    await kubectlOk(['create', 'namespace', NS]);
    const [repository, tag] = [node.gatehouseImage.slice(0, node.gatehouseImage.lastIndexOf(':')), node.gatehouseImage.slice(node.gatehouseImage.lastIndexOf(':') + 1)];
    const started = Date.now();
    const install = await helm(
      ['install', RELEASE, CHART_DIR, '-n', NS, '--set', `image.repository=${repository}`, '--set', `image.tag=${tag}`, '--set', 'image.pullPolicy=Never'],
      { timeoutMs: 120_000 },
    );
    if (install.code !== 0) throw new Error(`helm install failed: ${install.stderr}`);
    const wait = await kubectl(['-n', NS, 'wait', '--for=condition=Available', 'deployment', '--all', '--timeout=180s'], { timeoutMs: 200_000 });
    if (wait.code !== 0) {
      const describePods = await kubectl(['-n', NS, 'describe', 'pods']);
      throw new Error(`deployments not Available: ${wait.stderr}\n${describePods.stdout.slice(-6000)}`);
    }
    installToReadyMs = Date.now() - started;
    console.log(`helm install → every pod Ready: ${(installToReadyMs / 1000).toFixed(1)} s`);
    const upstream = await kubectl(['-n', UPSTREAM_NS, 'rollout', 'status', 'deployment/orders', '--timeout=120s'], { timeoutMs: 150_000 });
    if (upstream.code !== 0) throw new Error(`upstream not ready: ${upstream.stderr}`);
  }, 900_000);

  afterAll(async () => {
    await Promise.all(forwards.map((f) => f.close()));
  }, 30_000);

  test('every control-plane and data-plane pod of a default install is Ready', async () => {
    const cp = await pods(NS, 'app.kubernetes.io/component=control-plane');
    const dp = await pods(NS, 'app.kubernetes.io/component=data-plane');
    expect(cp.map((p) => [p.metadata.name, isReady(p)])).toEqual(cp.map((p) => [p.metadata.name, true]));
    expect(dp.map((p) => [p.metadata.name, isReady(p)])).toEqual(dp.map((p) => [p.metadata.name, true]));
    // The chart's defaults: 2 control-plane replicas, 2 data planes (the HPA's minimum).
    expect(cp).toHaveLength(2);
    expect(dp).toHaveLength(2);
    expect(installToReadyMs).toBeGreaterThan(0);
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
});

function expectUpstreamAnswer(res: HttpResponse): void {
  const body = res.json as { host: string; url: string };
  // The upstream pod answered (its name is the host), with the listen path stripped.
  expect(body.host).toMatch(/^orders-/);
  expect(body.url).toBe('/42');
}
