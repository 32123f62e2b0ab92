/**
 * TLS to HTTPS upstreams (UPSTREAM_CA_FILE, UPSTREAM_TLS_CERT / UPSTREAM_TLS_KEY; docs/proxy.md
 * "Proxy behaviour"): real data planes forward to real HTTPS upstreams whose certificates a private CA issued.
 * Without the CA the upstream is not trusted (502); with it, it is; an upstream asking for a client certificate gets the configured one; health probes go the same
 * way; a replaced CA file is taken on SIGHUP for new connections, a half-written one refused; bad
 * settings stop the start, naming the variable.
 */
import { copyFile, readFile, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { join } from 'node:path';
import { listen } from '#proto/listen';
import { createAdminClient, type AdminClient } from '../helpers/admin-client.js';
import { apiDefinition } from '../helpers/api-definition.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';
import { expectDataPlaneRefusesToStart, startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { createTestCertificates, type CertificateFiles } from '../helpers/test-certificates.js';

let certs: CertificateFiles;
let other: CertificateFiles;
let cp: ControlPlane;
let admin: AdminClient;
/** Answers with the subject of the client certificate it was given ('' for none). */
let server: Server;
/** The same, but refuses connections without a client certificate its CA issued. */
let mutual: Server;
let serverUrl: string;
let mutualUrl: string;
const dps: DataPlane[] = [];
/** The last admin write of beforeAll: a new data plane serves once it holds it. */
let lastWrite: Awaited<ReturnType<AdminClient['createApi']>>;

async function httpsServer(options: { requestCert: boolean }): Promise<[Server, string]> {
  const s = createServer(
    {
      cert: await readFile(certs.serverCert),
      key: await readFile(certs.serverKey),
      ca: await readFile(certs.caCert),
      requestCert: options.requestCert,
      rejectUnauthorized: options.requestCert,
    },
    (req, res) => {
      const peer = (req.socket as TLSSocket).getPeerCertificate();
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ client: peer?.subject?.CN ?? '', path: req.url }));
    },
  );
  const port = await listen(s, 0, '127.0.0.1');
  return [s, `https://127.0.0.1:${port}`];
}

beforeAll(async () => {
  [certs, other] = await Promise.all([createTestCertificates(), createTestCertificates()]);
  [server, serverUrl] = await httpsServer({ requestCert: false });
  [mutual, mutualUrl] = await httpsServer({ requestCert: true });
  cp = await startControlPlane();
  admin = await createAdminClient(cp);
  for (const api of [
    apiDefinition({ name: 'private', listenPath: '/private/*', targets: [serverUrl] }),
    apiDefinition({ name: 'mutual', listenPath: '/mutual/*', targets: [mutualUrl] }),
  ]) {
    lastWrite = await admin.createApi(api);
    expect(lastWrite.status).toBe(201);
  }
}, 60_000);

afterAll(async () => {
  await Promise.all(dps.map((dp) => dp.kill()));
  await cp?.dispose();
  server?.close();
  mutual?.close();
  await Promise.all([certs?.dispose(), other?.dispose()]);
});

async function dataPlane(env: Record<string, string>): Promise<DataPlane> {
  const dp = await startDataPlane({ controlPlaneAddr: cp.grpcAddr, env: { TLS_RELOAD_INTERVAL: '1h', ...env } });
  dps.push(dp);
  await admin.waitForDataPlanes(lastWrite, [dp]);
  return dp;
}

test('without UPSTREAM_CA_FILE an upstream certificate from a private CA is not trusted: 502', async () => {
  const dp = await dataPlane({});
  const res = await dp.request('GET', '/private/x');
  expect(res.status).toBe(502);
});

test('with UPSTREAM_CA_FILE it is trusted, and no client certificate is sent unless configured', async () => {
  const dp = await dataPlane({ UPSTREAM_CA_FILE: certs.caCert });
  const res = await dp.request('GET', '/private/x');
  expect(res.status).toBe(200);
  expect(res.json).toEqual({ client: '', path: '/private/x' });
  // An upstream that asks for a client certificate refuses this data plane.
  expect((await dp.request('GET', '/mutual/x')).status).toBe(502);
});

test('UPSTREAM_TLS_CERT / UPSTREAM_TLS_KEY: an upstream that asks for a client certificate gets that one', async () => {
  const dp = await dataPlane({ UPSTREAM_CA_FILE: certs.caCert, UPSTREAM_TLS_CERT: certs.clientCert, UPSTREAM_TLS_KEY: certs.clientKey });
  const res = await dp.request('GET', '/mutual/x');
  expect(res.status).toBe(200);
  expect(res.json).toEqual({ client: 'client', path: '/mutual/x' });
});

test('health probes go through the same TLS settings', async () => {
  const dp = await dataPlane({ UPSTREAM_CA_FILE: certs.caCert, UPSTREAM_TLS_CERT: certs.clientCert, UPSTREAM_TLS_KEY: certs.clientKey });
  const checked = apiDefinition({ name: 'probed', listenPath: '/probed/*', targets: [mutualUrl] }) as { proxy: { upstreams: Record<string, unknown> } };
  checked.proxy.upstreams.health_check = { active: { path: '/health', interval: '100ms', unhealthy_threshold: 1 } };
  const created = await admin.createApi(checked);
  expect(created.status).toBe(201);
  await admin.waitForDataPlanes(created, [dp]);
  // Probes that fail the TLS handshake would mark the target unhealthy within a few intervals.
  await new Promise((r) => setTimeout(r, 500));
  const metrics = (await fetch(`${dp.statusUrl}/metrics`).then((r) => r.text())).split('\n');
  expect(metrics).toContain(`gatehouse_upstream_target_healthy{route="api:probed",target="${mutualUrl}"} 1`);
  expect(dp.recentLogs(100)).not.toContain('upstream target unhealthy');
  expect((await admin.deleteApi('probed')).status).toBe(204);
});

test('SIGHUP takes a replaced CA file for new connections; a half-written one is refused and the last good one kept', async () => {
  const ca = join(certs.dir, 'upstream-ca.crt');
  await copyFile(certs.caCert, ca);
  const dp = await dataPlane({ UPSTREAM_CA_FILE: ca });
  expect((await dp.request('GET', '/private/x')).status).toBe(200);

  const reloads = () =>
    dp.process
      .lines()
      .filter((l) => l.json?.listener === 'upstream')
      .map((l) => l.json!.msg);
  await writeFile(ca, (await readFile(certs.caCert, 'utf8')).slice(0, 100));
  process.kill(dp.process.pid, 'SIGHUP');
  await pollUntil(async () => (reloads().length === 1 ? true : undefined), { what: 'a refused reload', details: () => dp.recentLogs() });
  expect(reloads()).toEqual(['certificate reload refused; keeping the previous certificate']);
  expect((await dp.request('GET', '/private/x')).status).toBe(200);

  // Another CA: the upstream's certificate is no longer trusted on new connections.
  await copyFile(other.caCert, ca);
  process.kill(dp.process.pid, 'SIGHUP');
  await pollUntil(async () => (reloads().length === 2 ? true : undefined), { what: 'a second reload', details: () => dp.recentLogs() });
  expect(reloads()[1]).toBe('certificates reloaded');
  expect((await dp.request('GET', '/private/x')).status).toBe(502);

  await copyFile(certs.caCert, ca);
  process.kill(dp.process.pid, 'SIGHUP');
  await pollUntil(async () => (reloads().length === 3 ? true : undefined), { what: 'a third reload', details: () => dp.recentLogs() });
  expect((await dp.request('GET', '/private/x')).status).toBe(200);
});

test.each([
  ['a CA file that does not exist', () => ({ UPSTREAM_CA_FILE: join(certs.dir, 'missing.crt') }), 'UPSTREAM_CA_FILE: cannot read'],
  ['a CA file that is no certificate', () => ({ UPSTREAM_CA_FILE: certs.clientKey }), 'UPSTREAM_CA_FILE:'],
  ["a key that is not the certificate's", () => ({ UPSTREAM_TLS_CERT: certs.clientCert, UPSTREAM_TLS_KEY: other.clientKey }), 'UPSTREAM_TLS_KEY:'],
  ['a certificate without its key', () => ({ UPSTREAM_TLS_CERT: certs.clientCert }), 'UPSTREAM_TLS_CERT: needs UPSTREAM_TLS_KEY (both or neither)'],
])('%s: the data plane does not start, and says which setting is wrong', async (_name, tlsEnv, message) => {
  await expectDataPlaneRefusesToStart(cp.grpcAddr, tlsEnv(), message);
});
