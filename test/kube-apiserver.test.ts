/**
 * The Kubernetes test helper itself (test/helpers/kube-apiserver.ts) on the real etcd +
 * kube-apiserver built by scripts/test-tools.sh: admin token, RBAC on a ServiceAccount token from
 * the TokenRequest API, and an apiserver restart that keeps etcd's data. Missing tools fail here.
 */
import { request } from 'node:https';
import { readFile } from 'node:fs/promises';
import { startKubeApiServer, type KubeApiServer } from './helpers/kube-apiserver.js';

// Per hook/test (the `jest` global does not exist in ESM test files): start-up on a busy 2-core
// machine and an apiserver restart both fit well within it.
const TIMEOUT_MS = 120_000;

const NAMESPACE = 'helper-check';

let server: KubeApiServer;

interface Reply {
  status: number;
  json: any;
}

/** Plain HTTPS with the run's CA: the point is to check the apiserver, not a client library. */
function kube(method: string, path: string, token: string, body?: unknown): Promise<Reply> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(path, server.url),
      {
        method,
        ca: server.caPem,
        agent: false,
        headers: { authorization: `Bearer ${token}`, accept: 'application/json', ...(payload ? { 'content-type': 'application/json' } : {}) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: text ? JSON.parse(text) : undefined }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

async function expectStatus(reply: Promise<Reply>, status: number): Promise<any> {
  const { status: got, json } = await reply;
  if (got !== status) throw new Error(`expected HTTP ${status}, got ${got}: ${JSON.stringify(json)}\n${server.recentLogs(20)}`);
  return json;
}

/** A namespace, a ServiceAccount bound to a Role that may get ConfigMaps, and one ConfigMap: what the tests read. */
async function createFixtures(): Promise<void> {
  const admin = server.adminToken;
  const inNamespace = `/api/v1/namespaces/${NAMESPACE}`;
  const rbac = 'rbac.authorization.k8s.io';
  const create = (path: string, object: Record<string, unknown>) => expectStatus(kube('POST', path, admin, object), 201);
  await create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } });
  await create(`${inNamespace}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'reader' } });
  await create(`/apis/${rbac}/v1/namespaces/${NAMESPACE}/roles`, {
    apiVersion: `${rbac}/v1`,
    kind: 'Role',
    metadata: { name: 'configmap-getter' },
    rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get'] }],
  });
  await create(`/apis/${rbac}/v1/namespaces/${NAMESPACE}/rolebindings`, {
    apiVersion: `${rbac}/v1`,
    kind: 'RoleBinding',
    metadata: { name: 'reader-gets-configmaps' },
    roleRef: { apiGroup: rbac, kind: 'Role', name: 'configmap-getter' },
    subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace: NAMESPACE }],
  });
  await create(`${inNamespace}/configmaps`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings' }, data: { mode: 'test' } });
}

beforeAll(async () => {
  const started = Date.now();
  server = await startKubeApiServer();
  // Start-up time shows in the test output: it is the fixed cost of every Kubernetes test file.
  console.log(`etcd + kube-apiserver ready in ${Date.now() - started} ms at ${server.url}`);
  // Here, not in a test: the restart test reads them too, and tests run in any order.
  await createFixtures();
}, TIMEOUT_MS);

afterAll(async () => {
  await server?.stop();
}, TIMEOUT_MS);

test(
  'the admin token lists namespaces',
  async () => {
    expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const list = await expectStatus(kube('GET', '/api/v1/namespaces', server.adminToken), 200);
    expect(list.items.map((ns: { metadata: { name: string } }) => ns.metadata.name)).toEqual(expect.arrayContaining(['default', 'kube-system']));
    // No token, no access: the anonymous user has no RBAC grant on namespaces.
    const anonymous = await kube('GET', '/api/v1/namespaces', '');
    expect([401, 403]).toContain(anonymous.status);
  },
  TIMEOUT_MS,
);

test(
  'a ServiceAccount token is held to its Role',
  async () => {
    const admin = server.adminToken;
    // The ServiceAccount exists already: serviceAccountToken must reuse it, not fail.
    const token = await server.serviceAccountToken(NAMESPACE, 'reader');
    const configMap = await expectStatus(kube('GET', `/api/v1/namespaces/${NAMESPACE}/configmaps/settings`, token), 200);
    expect(configMap.data).toEqual({ mode: 'test' });
    const secrets = await expectStatus(kube('GET', `/api/v1/namespaces/${NAMESPACE}/secrets`, token), 403);
    expect(secrets.message).toContain(`system:serviceaccount:${NAMESPACE}:reader`);
    await expectStatus(kube('GET', `/api/v1/namespaces/${NAMESPACE}/configmaps`, token), 403);

    // A ServiceAccount that does not exist yet is created.
    const other = await server.serviceAccountToken(NAMESPACE, 'created-by-helper');
    await expectStatus(kube('GET', `/api/v1/namespaces/${NAMESPACE}/serviceaccounts/created-by-helper`, admin), 200);
    await expectStatus(kube('GET', `/api/v1/namespaces/${NAMESPACE}/configmaps/settings`, other), 403);

    const kubeconfig = await readFile(await server.writeKubeconfig(token, undefined, NAMESPACE), 'utf8');
    expect(kubeconfig).toContain(`server: "${server.url}"`);
    expect(kubeconfig).toContain(`certificate-authority: "${server.caFile}"`);
    expect(kubeconfig).toContain(`namespace: "${NAMESPACE}"`);
  },
  TIMEOUT_MS,
);

test(
  'a restarted apiserver keeps its url and etcd keeps the data',
  async () => {
    const url = server.url;
    const token = await server.serviceAccountToken(NAMESPACE, 'reader');
    await server.stopApiServer();
    await expect(kube('GET', '/readyz', server.adminToken)).rejects.toThrow(/ECONNREFUSED/);
    await server.startApiServer();
    expect(server.url).toBe(url);
    const namespace = await expectStatus(kube('GET', `/api/v1/namespaces/${NAMESPACE}`, server.adminToken), 200);
    expect(namespace.metadata.name).toBe(NAMESPACE);
    // Same signing key across the restart: tokens issued before it still verify.
    await expectStatus(kube('GET', `/api/v1/namespaces/${NAMESPACE}/configmaps/settings`, token), 200);
  },
  TIMEOUT_MS,
);
