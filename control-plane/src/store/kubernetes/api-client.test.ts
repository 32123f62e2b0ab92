import { copyFile, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { createTestCertificates, type CertificateFiles } from '../../../../test/helpers/test-certificates.js';
import { createRateLimiter, customObjectsApi, jsonPutter, MAX_APISERVER_SOCKETS } from './api-client.js';

/** A TLS server standing in for the apiserver's list endpoint: counts TLS connections and the bearer tokens it saw. */
let certs: CertificateFiles;
let server: Server;
let connections = 0;
const tokens: string[] = [];
/** When each request arrived (performance.now()). */
const arrivals: number[] = [];
/** Every request as received. */
const puts: Array<{ method: string; url: string; type: string; body: string }> = [];

beforeAll(async () => {
  certs = await createTestCertificates();
  server = createServer({ cert: await readFile(certs.serverCert), key: await readFile(certs.serverKey) }, async (req, res) => {
    tokens.push(String(req.headers.authorization));
    arrivals.push(performance.now());
    let body = '';
    for await (const chunk of req) body += chunk;
    puts.push({ method: req.method!, url: req.url!, type: String(req.headers['content-type']), body });
    if (req.url?.includes('/conflicted/')) {
      res.writeHead(409, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', code: 409, message: 'the object has been modified' }));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ apiVersion: 'gatehouse.dev/v1alpha1', kind: 'ApiDefinitionList', metadata: {}, items: [] }));
  });
  server.on('secureConnection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await certs.dispose();
});

function kubeConfigWithToken(token: { value: string }, caFile = certs.caCert): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, caFile, skipTLSVerify: false }],
    users: [{ name: 'u', token: token.value }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  // As a projected service-account token is re-read: the user's token may change between requests.
  const user = kc.getCurrentUser()!;
  Object.defineProperty(user, 'token', { get: () => token.value });
  return kc;
}

test('requests share kept-alive TLS connections (client-node alone opens one per request), each with the current token', async () => {
  connections = 0;
  tokens.length = 0;
  const token = { value: 'first' };
  const api = customObjectsApi(kubeConfigWithToken(token), 5000);
  const list = () => api.listNamespacedCustomObject({ group: 'gatehouse.dev', version: 'v1alpha1', namespace: 'ns', plural: 'apidefinitions' });
  for (let i = 0; i < 5; i++) await list();
  token.value = 'second';
  await list();
  expect(connections).toBe(1);
  expect(tokens).toEqual([...Array(5).fill('Bearer first'), 'Bearer second']);
});

test('the CA file is read once, when the client is made (client-node read it again for every request)', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-ca-'));
  try {
    const caFile = join(dir, 'ca.crt');
    await copyFile(certs.caCert, caFile);
    const api = customObjectsApi(kubeConfigWithToken({ value: 't' }, caFile), 5000);
    await rm(caFile);
    // Read per request, the missing file would fail this one (ENOENT) before it is sent.
    const list = await api.listNamespacedCustomObject({ group: 'gatehouse.dev', version: 'v1alpha1', namespace: 'ns', plural: 'apidefinitions' });
    expect(list).toMatchObject({ kind: 'ApiDefinitionList' });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('with a rate limit, a burst goes at once and the rest wait for their tokens; the limiter is shared by the clients given it', async () => {
  arrivals.length = 0;
  const limiter = createRateLimiter({ qps: 5, burst: 2 });
  const apis = [customObjectsApi(kubeConfigWithToken({ value: 't' }), 5000, limiter), customObjectsApi(kubeConfigWithToken({ value: 't' }), 5000, limiter)];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: 6 }, (_, i) =>
      apis[i % 2]!.listNamespacedCustomObject({ group: 'gatehouse.dev', version: 'v1alpha1', namespace: 'ns', plural: 'apidefinitions' }),
    ),
  );
  const sorted = arrivals.map((t) => t - started).sort((a, b) => a - b);
  expect(sorted).toHaveLength(6);
  // 2 from the burst, then one per 200 ms: the 3rd no sooner than 200 ms, the 6th than 800 ms (lower bounds: load only delays).
  expect(sorted[2]!).toBeGreaterThanOrEqual(195);
  expect(sorted[5]!).toBeGreaterThanOrEqual(795);
});

test('jsonPutter: a JSON PUT on a kept-alive connection with the current token, through the shared limiter; a refusal rejects with its code and message', async () => {
  connections = 0;
  tokens.length = 0;
  puts.length = 0;
  arrivals.length = 0;
  const token = { value: 'first' };
  const limiter = createRateLimiter({ qps: 5, burst: 1 });
  const put = jsonPutter(kubeConfigWithToken(token), 5000, limiter)!;
  const started = performance.now();
  await put('/apis/gatehouse.dev/v1alpha1/namespaces/ns/apidefinitions/a/status', { status: { n: 1 } });
  token.value = 'second';
  await put('/apis/gatehouse.dev/v1alpha1/namespaces/ns/apidefinitions/b/status', { status: { n: 2 } });
  await expect(put('/apis/gatehouse.dev/v1alpha1/namespaces/ns/apidefinitions/conflicted/status', {})).rejects.toMatchObject({
    code: 409,
    message: expect.stringContaining('the object has been modified'),
  });
  expect(connections).toBe(1);
  expect(tokens).toEqual(['Bearer first', 'Bearer second', 'Bearer second']);
  expect(puts.slice(0, 2)).toEqual([
    { method: 'PUT', url: '/apis/gatehouse.dev/v1alpha1/namespaces/ns/apidefinitions/a/status', type: 'application/json', body: '{"status":{"n":1}}' },
    { method: 'PUT', url: '/apis/gatehouse.dev/v1alpha1/namespaces/ns/apidefinitions/b/status', type: 'application/json', body: '{"status":{"n":2}}' },
  ]);
  // Burst 1 at 5 a second: the third request no sooner than 400 ms after the first.
  expect(arrivals[2]! - started).toBeGreaterThanOrEqual(395);
});

test('jsonPutter: a burst of writes opens at most MAX_APISERVER_SOCKETS connections; the rest wait for one', async () => {
  const N = MAX_APISERVER_SOCKETS * 3;
  const put = jsonPutter(kubeConfigWithToken({ value: 't' }), 5000)!;
  connections = 0;
  puts.length = 0;
  await Promise.all(Array.from({ length: N }, () => put('/apis/gatehouse.dev/v1alpha1/namespaces/ns/apidefinitions/a/status', { status: {} })));
  expect(puts).toHaveLength(N);
  expect(connections).toBeGreaterThan(1);
  expect(connections).toBeLessThanOrEqual(MAX_APISERVER_SOCKETS);
});
