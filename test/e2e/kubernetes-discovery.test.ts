/**
 * Kubernetes service discovery on a real kube-apiserver + etcd (scripts/test-tools.sh; a missing tool
 * fails the run, as in kubernetes-store.test.ts): an API whose target names a Service
 * (`k8s://orders:8080/base`) is served from that Service's ready endpoints, read from EndpointSlices by a
 * CP running with a token bound to exactly deploy/rbac/role.yaml. No controller-manager runs here, so the
 * test writes the Service and its EndpointSlices as the endpoint controller would: one slice per
 * endpoint, each a real local upstream on its own port at this machine's first non-loopback IPv4
 * address (the apiserver refuses loopback endpoint addresses).
 */
import { randomBytes } from 'node:crypto';
import { networkInterfaces } from 'node:os';
import { jest } from '@jest/globals';
import type { KubernetesObject } from '@kubernetes/client-node';
import { createAdminClient, type AdminClient } from '../helpers/admin-client.js';
import { apiDefinition } from '../helpers/api-definition.js';
import { controlPlaneIdentity, createObject, installCrds, kubeClients, type KubeClients } from '../helpers/gatehouse-on-kubernetes.js';
import { startKubeApiServer, type KubeApiServer } from '../helpers/kube-apiserver.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';
import { startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

jest.setTimeout(120_000);

const NAMESPACE = 'gatehouse';

function hostAddress(): string {
  const found = Object.values(networkInterfaces())
    .flat()
    .find((a) => a && a.family === 'IPv4' && !a.internal);
  if (!found) throw new Error('kubernetes-discovery needs a non-loopback IPv4 address on this machine (EndpointSlices refuse loopback)');
  return found.address;
}
const ADDRESS = hostAddress();

let server: KubeApiServer;
let admin: KubeClients;
let cp: ControlPlane;
let dp: DataPlane;
let client: AdminClient;
const upstreams: Upstream[] = [];
const others: ControlPlane[] = [];

const service = (name: string): KubernetesObject =>
  ({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: NAMESPACE },
    // Headless: the apiserver allocates no cluster IP, and nothing here would route one anyway.
    spec: { clusterIP: 'None', selector: { app: name }, ports: [{ name: 'http', port: 8080, targetPort: 'http' }] },
  }) as KubernetesObject;

/** The slice `<service>-<i>`: one endpoint, upstream i's address and port, ready or not. */
const slice = (svc: string, i: number, ready: boolean): KubernetesObject =>
  ({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: `${svc}-${i}`, namespace: NAMESPACE, labels: { 'kubernetes.io/service-name': svc } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: upstreams[i].port, protocol: 'TCP' }],
    endpoints: [{ addresses: [ADDRESS], conditions: { ready, serving: ready, terminating: false } }],
  }) as KubernetesObject;

async function putObject(object: KubernetesObject): Promise<void> {
  try {
    const held = await admin.objects.read(object as never);
    await admin.objects.replace({ ...object, metadata: { ...object.metadata, resourceVersion: held.metadata?.resourceVersion } });
  } catch (err) {
    if ((err as { code?: number }).code !== 404) throw err;
    await admin.objects.create(object);
  }
}

async function deleteObject(object: KubernetesObject): Promise<void> {
  try {
    await admin.objects.delete(object);
  } catch (err) {
    if ((err as { code?: number }).code !== 404) throw err;
  }
}

const logs = () => `--- cp\n${cp.recentLogs(30)}\n--- dp\n${dp.recentLogs(30)}`;

/** The upstream indexes that served `n` requests to `path` in a row (-1: not an upstream's answer). */
async function servedBy(path: string, n: number): Promise<number[]> {
  const seen: number[] = [];
  for (let i = 0; i < n; i++) {
    const before = upstreams.map((u) => u.requests.length);
    const res = await dp.request('GET', path);
    seen.push(res.status === 200 ? upstreams.findIndex((u, j) => u.requests.length > before[j]) : -1);
  }
  return seen;
}

/** Polls until `n` requests in a row to `path` are answered by exactly the upstreams `expected` (each at least once). */
async function rotation(path: string, expected: number[], n = 6): Promise<number[]> {
  return pollUntil(
    async () => {
      const seen = await servedBy(path, n);
      return [...new Set(seen)].sort().join() === [...expected].sort().join() ? seen : undefined;
    },
    { what: `${path} served by upstreams ${expected.join(', ')}`, timeoutMs: 20_000, details: logs },
  );
}

async function createApi(name: string, target: string): Promise<void> {
  const res = await client.createApi(apiDefinition({ name, listenPath: `/${name}/*`, stripPath: true, targets: [target] }));
  expect(res.status).toBe(201);
}

beforeAll(async () => {
  server = await startKubeApiServer();
  admin = await kubeClients(await server.writeKubeconfig(server.adminToken));
  await installCrds(admin);
  const identity = await controlPlaneIdentity(server, admin, NAMESPACE);
  for (const i of [0, 1, 2]) upstreams.push(await startUpstream(`endpoint-${i}`, { kind: 'fixed' }, { host: ADDRESS }));
  cp = await startControlPlane({
    name: 'cp',
    env: {
      STORE: 'kubernetes',
      KUBECONFIG: identity.kubeconfig,
      GATEHOUSE_NAMESPACE: NAMESPACE,
      POD_NAME: 'cp',
      LEADER_ELECTION: 'false',
      ADMIN_PASSWORD: randomBytes(12).toString('hex'),
    },
  });
  dp = await startDataPlane({ controlPlaneAddr: cp.grpcAddr, id: 'dp' });
  client = await createAdminClient(cp);
  await client.login();
}, 180_000);

afterAll(async () => {
  await dp?.stop();
  await cp?.dispose();
  await Promise.allSettled(others.map((o) => o.dispose()));
  await Promise.allSettled(upstreams.map((u) => u.close()));
  await server?.stop();
});

test('an API naming a Service is balanced round robin over its ready endpoints; GET shows the Service target', async () => {
  await createObject(admin, service('orders'));
  await putObject(slice('orders', 0, true));
  await putObject(slice('orders', 1, true));
  await createApi('orders', 'k8s://orders:8080/base');
  const seen = await rotation('/orders/items/1', [0, 1]);
  // Round robin alternates between the two endpoints.
  for (let i = 1; i < seen.length; i++) expect(seen[i]).not.toBe(seen[i - 1]);
  expect(upstreams[0].last()?.url ?? upstreams[1].last()?.url).toBe('/base/items/1');
  const stored = await client.getApi('orders');
  expect(stored.body.proxy.upstreams.targets).toEqual(
    [{ target: 'k8s://orders:8080/base', weight: expect.anything() }].map((t) => expect.objectContaining({ target: t.target })),
  );
  const explained = await client.request('POST', '/explain', { body: { method: 'GET', path: '/orders/items/1' } });
  expect(JSON.stringify(explained.body)).toContain(`${upstreams[0].url}/base`);
});

test('an endpoint marked not ready leaves the rotation; marked ready again it comes back', async () => {
  await createObject(admin, service('ready'));
  await putObject(slice('ready', 0, true));
  await putObject(slice('ready', 1, true));
  await createApi('ready', 'k8s://ready:http');
  await rotation('/ready/x', [0, 1]);
  await putObject(slice('ready', 1, false));
  await rotation('/ready/x', [0]);
  await putObject(slice('ready', 1, true));
  await rotation('/ready/x', [0, 1]);
});

test('no ready endpoint (all not ready, then no slice) answers 503 NO_ENDPOINTS, not a failed connect', async () => {
  await createObject(admin, service('empty'));
  await putObject(slice('empty', 2, true));
  await createApi('empty', 'k8s://empty:8080');
  await rotation('/empty/x', [2]);
  await putObject(slice('empty', 2, false));
  const answer = async () => {
    const res = await dp.request('GET', '/empty/x');
    return res.status === 503 ? res : undefined;
  };
  let res = await pollUntil(answer, { what: '503 once not ready', timeoutMs: 20_000, details: logs });
  expect(res.body.toString()).toContain('upstream service has no ready endpoints');
  await putObject(slice('empty', 2, true));
  await rotation('/empty/x', [2]);
  await deleteObject(slice('empty', 2, true));
  res = await pollUntil(answer, { what: '503 once the slice is deleted', timeoutMs: 20_000, details: logs });
  expect(res.body.toString()).toContain('upstream service has no ready endpoints');
});

test('a scale-up (a new endpoint) joins the rotation', async () => {
  await createObject(admin, service('scale'));
  await putObject(slice('scale', 0, true));
  await createApi('scale', 'k8s://scale:8080');
  await rotation('/scale/x', [0]);
  await putObject(slice('scale', 1, true));
  await rotation('/scale/x', [0, 1]);
});

test('a Service in a namespace the control plane does not discover in is refused with 400', async () => {
  const res = await client.createApi(apiDefinition({ name: 'elsewhere', listenPath: '/elsewhere/*', targets: ['k8s://orders.shop:8080'] }));
  expect(res.status).toBe(400);
  expect(res.body.error).toContain('proxy.upstreams.targets[0].target names namespace "shop"');
});

test('without Kubernetes access (file store) a Service target is refused with 400 saying why', async () => {
  const fileCp = await startControlPlane({ name: 'file-cp' });
  others.push(fileCp);
  const fileClient = await createAdminClient(fileCp);
  await fileClient.login();
  const res = await fileClient.createApi(apiDefinition({ name: 'orders', listenPath: '/orders/*', targets: ['k8s://orders:8080'] }));
  expect(res.status).toBe(400);
  expect(res.body.error).toContain(
    'proxy.upstreams.targets[0].target names a Kubernetes Service: service discovery needs the control plane to run with STORE=kubernetes',
  );
  // A whole-configuration write is refused alike, naming the item.
  const put = await fileClient.request('PUT', '/config', {
    body: { apis: [apiDefinition({ name: 'orders', listenPath: '/orders/*', targets: ['k8s://orders:8080'] })] },
  });
  expect(put.status).toBe(400);
  expect(put.body.error).toContain('apis[0].proxy.upstreams.targets[0].target names a Kubernetes Service');
  expect((await fileClient.listApis()).body).toEqual([]);
});

test('a restarted control plane serves a Service’s endpoints from its first snapshot, never the bare Service target', async () => {
  await createObject(admin, service('restart'));
  await putObject(slice('restart', 0, true));
  await createApi('restart', 'k8s://restart:8080');
  await rotation('/restart/x', [0]);
  await cp.stop();
  await cp.restart();
  await client.login();
  await rotation('/restart/x', [0]);
  // The first snapshot already held the endpoints: no second one was built for them (nothing else was written).
  expect(cp.recentLogs(500)).not.toContain('snapshot built');
  const explained = await client.request('POST', '/explain', { body: { method: 'GET', path: '/restart/x' } });
  expect(JSON.stringify(explained.body)).toContain(upstreams[0].url);
});
