import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { createTestCertificates, type CertificateFiles } from '../../../../test/helpers/test-certificates.js';
import { customObjectsApi } from './api-client.js';

/** A TLS server standing in for the apiserver's list endpoint: counts TLS connections and the bearer tokens it saw. */
let certs: CertificateFiles;
let server: Server;
let connections = 0;
const tokens: string[] = [];

beforeAll(async () => {
  certs = await createTestCertificates();
  server = createServer({ cert: await readFile(certs.serverCert), key: await readFile(certs.serverKey) }, (req, res) => {
    tokens.push(String(req.headers.authorization));
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

function kubeConfigWithToken(token: { value: string }): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, caFile: certs.caCert, skipTLSVerify: false }],
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
