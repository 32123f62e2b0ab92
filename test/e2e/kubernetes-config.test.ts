/**
 * PUT /config with STORE=kubernetes on a real kube-apiserver + etcd, the CP running with exactly
 * deploy/rbac/role.yaml: the whole document is validated first (nothing written on a 400), then
 * applied as CR creates / updates / deletes; a failure part-way is reported with what was and was
 * not applied. History is this replica's, in memory; rollback re-applies a version as CRs.
 */
import { randomBytes } from 'node:crypto';
import { jest } from '@jest/globals';
import { createAdminClient, type AdminClient } from '../helpers/admin-client.js';
import { apiDefinition } from '../helpers/api-definition.js';
import { controlPlaneIdentity, installCrds, kubeClients, type KubeClients } from '../helpers/gatehouse-on-kubernetes.js';
import { startKubeApiServer, type KubeApiServer } from '../helpers/kube-apiserver.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';
import { startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

jest.setTimeout(120_000);

const NAMESPACE = 'gatehouse-config';
const GROUP = { group: 'gatehouse.dev', version: 'v1alpha1', namespace: NAMESPACE };
const APIS = { ...GROUP, plural: 'apidefinitions' };
const SERVERS = { ...GROUP, plural: 'oauthservers' };

let server: KubeApiServer;
let admin: KubeClients;
let cp: ControlPlane;
let dp: DataPlane;
let client: AdminClient;
let upstream: Upstream;

const api = (name: string, extra: Partial<Parameters<typeof apiDefinition>[0]> = {}) =>
  apiDefinition({ name, listenPath: `/${name}/*`, targets: [upstream.url], ...extra });
const jwtServer = (name: string) => ({
  name,
  oauth_endpoints: { token: { listen_path: `/${name}/token`, upstreams: { targets: [{ target: `${upstream.url}/token` }] } } },
  token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: 'a-shared-secret-of-some-length-0123' }] },
});

async function crNames(plural: typeof APIS | typeof SERVERS): Promise<string[]> {
  const list = (await admin.custom.listNamespacedCustomObject(plural)) as { items: Array<{ metadata: { name: string } }> };
  return list.items.map((i) => i.metadata.name).sort();
}

async function served(path: string, status: number): Promise<void> {
  await pollUntil(async () => ((await dp.request('GET', path)).status === status ? true : undefined), {
    what: `${path} answered ${status}`,
    timeoutMs: 20_000,
    details: () => `${cp.recentLogs(20)}\n${dp.recentLogs(20)}`,
  });
}

beforeAll(async () => {
  server = await startKubeApiServer();
  admin = await kubeClients(await server.writeKubeconfig(server.adminToken));
  await installCrds(admin);
  const identity = await controlPlaneIdentity(server, admin, NAMESPACE);
  upstream = await startUpstream('k8s-config-upstream');
  cp = await startControlPlane({
    name: 'cp-k8s-config',
    env: {
      STORE: 'kubernetes',
      KUBECONFIG: identity.kubeconfig,
      GATEHOUSE_NAMESPACE: NAMESPACE,
      POD_NAME: 'cp-k8s-config',
      LEASE_DURATION: '2s',
      ADMIN_JWT_SECRET: randomBytes(32).toString('hex'),
    },
  });
  dp = await startDataPlane({ controlPlaneAddr: cp.grpcAddr });
  client = await createAdminClient(cp);
}, 180_000);

afterAll(async () => {
  await dp?.stop();
  await cp?.dispose();
  await upstream?.close();
  await server?.stop();
});

test('PUT /config creates, updates and deletes custom resources; history and rollback work on this replica', async () => {
  const first = await client.request('PUT', '/config', {
    body: {
      apis: [api('k-open'), api('k-closed', { plugins: [{ name: 'oauth2', enabled: true, config: { server_name: 'k-auth' } }] })],
      oauth_servers: [jwtServer('k-auth')],
    },
  });
  expect(first.status).toBe(200);
  expect(first.body.diff.apis.added).toEqual(['k-open', 'k-closed']);
  expect(await crNames(APIS)).toEqual(expect.arrayContaining(['k-closed', 'k-open']));
  expect(await crNames(SERVERS)).toContain('k-auth');
  await served('/k-open/x', 200);
  await served('/k-closed/x', 400);

  // The server goes away with the API that used it: the API is deleted first.
  const second = await client.request('PUT', '/config', { body: { apis: [api('k-open', { hosts: ['k.example.com'] })] } });
  expect(second.status).toBe(200);
  expect(second.body.diff).toMatchObject({ apis: { changed: ['k-open'], removed: ['k-closed'] }, oauth_servers: { removed: ['k-auth'] } });
  expect(await crNames(APIS)).not.toContain('k-closed');
  expect(await crNames(SERVERS)).not.toContain('k-auth');
  expect(((await admin.custom.getNamespacedCustomObject({ ...APIS, name: 'k-open' })) as any).spec.hosts).toEqual(['k.example.com']);
  await served('/k-closed/x', 404);

  const history = (await client.request('GET', '/config/history')).body as any[];
  expect(history.slice(0, 2).map((e) => [e.version, e.action])).toEqual([
    [second.body.version, 'PUT /config'],
    [first.body.version, 'PUT /config'],
  ]);
  const rollback = await client.request('POST', `/config/rollback/${first.body.version}`);
  expect(rollback.status).toBe(200);
  expect(rollback.body.diff).toMatchObject({ apis: { added: ['k-closed'], changed: ['k-open'] }, oauth_servers: { added: ['k-auth'] } });
  expect(await crNames(SERVERS)).toContain('k-auth');
  await served('/k-closed/x', 400);
});

test('an invalid document is refused whole: 400 naming the item, no custom resource written', async () => {
  const before = await crNames(APIS);
  const res = await client.request('PUT', '/config', {
    body: { apis: [api('v-ok'), { name: 'v-bad', proxy: { listen_path: 'no-slash', upstreams: { targets: [{ target: upstream.url }] } } }] },
  });
  expect(res.status).toBe(400);
  expect(res.body.error).toMatch(/^apis\[1\]\.proxy\.listen_path/);
  expect(await crNames(APIS)).toEqual(before);
});

test('a failure part-way is reported with what was applied and what was not', async () => {
  // A CR named like the API the document creates, holding another API (spec.name): its create is refused.
  await admin.custom.createNamespacedCustomObject({
    ...APIS,
    body: { apiVersion: 'gatehouse.dev/v1alpha1', kind: 'ApiDefinition', metadata: { name: 'p-second', namespace: NAMESPACE }, spec: api('p-squatter') },
  });
  await pollUntil(async () => ((await client.getApi('p-squatter')).status === 200 ? true : undefined), { what: 'p-squatter seen', timeoutMs: 20_000 });

  const res = await client.request('PUT', '/config', { body: { apis: [api('p-first'), api('p-second')] } });
  expect(res.status).toBe(409);
  expect(res.body.error).toContain('api name is already registered');
  expect(res.body.error).toMatch(
    /partially applied: 1 of \d+ changes done: create ApiDefinition "p-first"; not applied: create ApiDefinition "p-second", .*delete ApiDefinition "p-squatter"/,
  );
  expect((await client.getApi('p-first')).status).toBe(200);
  expect((await client.getApi('p-squatter')).status).toBe(200);
});
