/**
 * Control plane ↔ data plane over mutual TLS (docs/operations.md "Control plane ↔ data plane", GRPC_TLS_CERT/KEY/CA on both sides):
 * a DP holding a certificate from the shared CA syncs and serves; a plaintext DP and a DP whose
 * certificate comes from another CA never get a snapshot nor appear in GET /dataplanes.
 */
import { apiDefinition } from '../helpers/api-definition.js';
import { createAdminClient, type AdminClient } from '../helpers/admin-client.js';
import { delay } from '../helpers/poll-until.js';
import { startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';
import { startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { createTestCertificates, type CertificateFiles } from '../helpers/test-certificates.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

let certs: CertificateFiles;
let cp: ControlPlane;
let admin: AdminClient;
let dp: DataPlane;
let u: Upstream;

beforeAll(async () => {
  certs = await createTestCertificates();
  u = await startUpstream('tls-sync');
  cp = await startControlPlane({
    env: { GRPC_TLS_CERT: certs.serverCert, GRPC_TLS_KEY: certs.serverKey, GRPC_TLS_CA: certs.caCert },
  });
  admin = await createAdminClient(cp);
  dp = await startDataPlane({
    controlPlaneAddr: cp.grpcAddr,
    env: { GRPC_TLS_CERT: certs.clientCert, GRPC_TLS_KEY: certs.clientKey, GRPC_TLS_CA: certs.caCert },
  });
});

afterAll(async () => {
  const statuses = [];
  if (dp) statuses.push(await dp.stop());
  if (cp) statuses.push(await cp.stop());
  await cp?.dispose();
  await u?.close();
  await certs?.dispose();
  expect(statuses.map((s) => s.code)).toEqual(statuses.map(() => 0));
});

test('a data plane with a certificate from the shared CA syncs and serves', async () => {
  const created = await admin.createApi(apiDefinition({ name: 'tls', listenPath: '/tls/*', targets: [u.url] }));
  expect(created.status).toBe(201);
  await admin.waitForDataPlanes(created, [dp]);
  expect((await dp.request('GET', '/tls/a')).status).toBe(200);
  const listed = await admin.dataplanes();
  expect(listed.body.map((row: { id: string }) => row.id)).toContain(dp.id);
});

test.each([
  { row: 'plaintext data plane', env: {} as Record<string, string> },
  { row: 'certificate from another CA', env: { GRPC_TLS_CERT: 'rogueClientCert', GRPC_TLS_KEY: 'rogueClientKey', GRPC_TLS_CA: 'caCert' } },
])('$row: refused, never ready, not listed', async ({ env }) => {
  const files = Object.fromEntries(Object.entries(env).map(([k, v]) => [k, certs[v as keyof CertificateFiles] as string]));
  const outsider = await startDataPlane({ controlPlaneAddr: cp.grpcAddr, env: files, waitForSnapshot: false });
  try {
    // A negative result needs a window: several reconnect attempts (backoff 100 ms .. 1 s).
    await delay(1_500);
    const ready = await outsider.readyz();
    expect(ready.status).toBe(503);
    const listed = await admin.dataplanes();
    expect(listed.body.map((row: { id: string }) => row.id)).not.toContain(outsider.id);
    expect((await outsider.request('GET', '/tls/a')).status).toBe(503);
  } finally {
    expect((await outsider.stop()).code).toBe(0);
  }
});
