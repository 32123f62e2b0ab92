/**
 * HTTPS on the proxy listener (PROXY_TLS_CERT / PROXY_TLS_KEY, docs/proxy.md "Proxy behaviour"): a real data
 * plane serves its routes over TLS with the given certificate, tells the upstream the client's scheme in
 * X-Forwarded-Proto, serves no plaintext on that port, takes a renewed certificate on SIGHUP (and in a
 * WORKERS=2 data plane, every worker does), and refuses to start, naming the variable, on an unusable file.
 */
import { X509Certificate } from 'node:crypto';
import { copyFile, readFile } from 'node:fs/promises';
import { connect } from 'node:tls';
import { join } from 'node:path';
import { createAdminClient, type AdminClient } from '../helpers/admin-client.js';
import { apiDefinition } from '../helpers/api-definition.js';
import { httpRequest } from '../helpers/http-request.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';
import { expectDataPlaneRefusesToStart, startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { createTestCertificates, type CertificateFiles } from '../helpers/test-certificates.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

let certs: CertificateFiles;
let renewed: CertificateFiles;
let cp: ControlPlane;
let admin: AdminClient;
let u: Upstream;

beforeAll(async () => {
  [certs, renewed] = await Promise.all([createTestCertificates(), createTestCertificates()]);
  u = await startUpstream('tls-upstream', { kind: 'echo' });
  cp = await startControlPlane();
  admin = await createAdminClient(cp);
  const created = await admin.createApi(apiDefinition({ name: 'over-tls', listenPath: '/over-tls/*', targets: [u.url] }));
  expect(created.status).toBe(201);
}, 60_000);

afterAll(async () => {
  await cp?.dispose();
  await u?.close();
  await Promise.all([certs?.dispose(), renewed?.dispose()]);
});

/** A data plane serving TLS from copies of `certs`' server files (so that a test may replace them). */
async function tlsDataPlane(name: string, env: Record<string, string> = {}): Promise<{ dp: DataPlane; cert: string; key: string }> {
  const cert = join(certs.dir, `${name}.crt`);
  const key = join(certs.dir, `${name}.key`);
  await copyFile(certs.serverCert, cert);
  await copyFile(certs.serverKey, key);
  // A reload interval far beyond the test: a new certificate is taken on SIGHUP only.
  const dp = await startDataPlane({ controlPlaneAddr: cp.grpcAddr, env: { PROXY_TLS_CERT: cert, PROXY_TLS_KEY: key, TLS_RELOAD_INTERVAL: '1h', ...env } });
  return { dp, cert, key };
}

const httpsUrl = (dp: DataPlane) => dp.proxyUrl.replace(/^http:/, 'https:');

/** The serial number of the certificate a new TLS connection to the data plane is given. */
function servedSerial(dp: DataPlane): Promise<string> {
  const { port } = new URL(dp.proxyUrl);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: Number(port), rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] }, () => {
      const serial = socket.getPeerX509Certificate()?.serialNumber;
      socket.end();
      if (serial) resolve(serial);
      else reject(new Error('no peer certificate'));
    });
    socket.once('error', reject);
  });
}

test('the routes are served over HTTPS with the configured certificate; the upstream is told X-Forwarded-Proto: https', async () => {
  const { dp } = await tlsDataPlane('served');
  try {
    const listening = dp.process.lines().find((l) => l.json?.msg === 'listening' && l.json?.listener === 'proxy');
    expect(listening?.json?.tls).toBe(true);
    const ca = await readFile(certs.caCert);
    const res = await httpRequest(`${httpsUrl(dp)}/over-tls/x`, { ca, headers: { 'x-forwarded-proto': 'http' } });
    expect(res.status).toBe(200);
    const seen = u.last()!;
    expect(seen.url).toBe('/over-tls/x');
    // The client's own claim is replaced by what the gateway saw (the client is no trusted proxy).
    expect(seen.headers['x-forwarded-proto']).toBe('https');
    expect(await servedSerial(dp)).toBe(new X509Certificate(await readFile(certs.serverCert)).serialNumber);
    // Only the configured CA's chain is accepted by a verifying client, and plaintext is not served at all.
    await expect(httpRequest(`${httpsUrl(dp)}/over-tls/x`)).rejects.toThrow(/certificate/);
    await expect(httpRequest(`${dp.proxyUrl}/over-tls/x`, { timeoutMs: 2_000 })).rejects.toThrow();
  } finally {
    expect((await dp.stop()).code).toBe(0);
  }
});

test('PROXY_HTTP_REDIRECT_PORT: a plain listener sends every request to HTTPS (308, same host, path and query); a bad Host is a 400', async () => {
  const { dp } = await tlsDataPlane('redirect', { PROXY_HTTP_REDIRECT_PORT: '0' });
  try {
    const port = dp.process.lines().find((l) => l.json?.msg === 'listening' && l.json?.listener === 'redirect')?.json?.port;
    expect(typeof port).toBe('number');
    const before = u.requests.length;
    const plain = `http://127.0.0.1:${String(port)}`;
    const get = await httpRequest(`${plain}/over-tls/x?a=1&b=%2F`, { headers: { host: 'Api.Example.com:8080', 'x-request-id': 'redirect-1' } });
    expect(get.status).toBe(308);
    expect(get.headers.location).toBe('https://api.example.com/over-tls/x?a=1&b=%2F');
    expect(get.headers['x-request-id']).toBe('redirect-1');
    const post = await httpRequest(`${plain}/over-tls/form`, {
      method: 'POST',
      headers: { host: '[2001:db8::1]:80', 'content-type': 'text/plain' },
      body: 'kept',
    });
    expect([post.status, post.headers.location]).toEqual([308, 'https://[2001:db8::1]/over-tls/form']);
    for (const host of ['evil.com/x', 'a b', 'x"y', 'a..b', 'h:99999x']) {
      const bad = await httpRequest(`${plain}/over-tls/x`, { headers: { host } });
      expect([host, bad.status, bad.json]).toEqual([host, 400, 'invalid host']);
    }
    // Nothing went upstream from the plain listener.
    expect(u.requests.length).toBe(before);
    // The HTTPS listener serves as before.
    expect((await httpRequest(`${httpsUrl(dp)}/over-tls/x`, { ca: await readFile(certs.caCert) })).status).toBe(200);
  } finally {
    expect((await dp.stop()).code).toBe(0);
  }
});

test('without PROXY_TLS_CERT the listener is plain HTTP and X-Forwarded-Proto is http', async () => {
  const dp = await startDataPlane({ controlPlaneAddr: cp.grpcAddr });
  try {
    expect(dp.process.lines().find((l) => l.json?.msg === 'listening' && l.json?.listener === 'proxy')?.json?.tls).toBe(false);
    expect((await dp.request('GET', '/over-tls/plain')).status).toBe(200);
    expect(u.last()!.headers['x-forwarded-proto']).toBe('http');
  } finally {
    expect((await dp.stop()).code).toBe(0);
  }
});

test.each<[string, Record<string, string>]>([
  ['one process', {}],
  ['WORKERS=2: the primary passes SIGHUP to every worker', { WORKERS: '2' }],
])('SIGHUP (%s): new connections get the renewed certificate, which the new CA verifies', async (_name, env) => {
  const { dp, cert, key } = await tlsDataPlane(`renewed-${Object.keys(env).length}`, env);
  try {
    const renewedSerial = new X509Certificate(await readFile(renewed.serverCert)).serialNumber;
    expect(await servedSerial(dp)).not.toBe(renewedSerial);
    await copyFile(renewed.serverCert, cert);
    await copyFile(renewed.serverKey, key);
    process.kill(dp.process.pid, 'SIGHUP');
    const workers = env.WORKERS ? Number(env.WORKERS) : 1;
    await pollUntil(async () => (dp.process.lines().filter((l) => l.json?.msg === 'certificates reloaded').length === workers ? true : undefined), {
      what: `${workers} "certificates reloaded" line(s)`,
      details: () => dp.recentLogs(),
    });
    // Connections are spread over the workers: several in a row reach each of them.
    for (let i = 0; i < 4 * workers; i++) expect(await servedSerial(dp)).toBe(renewedSerial);
    const res = await httpRequest(`${httpsUrl(dp)}/over-tls/renewed`, { ca: await readFile(renewed.caCert) });
    expect(res.status).toBe(200);
    expect(dp.process.running()).toBe(true);
  } finally {
    expect((await dp.stop()).code).toBe(0);
  }
});

test('a renewal caught half-written is refused with a warning; the previous certificate keeps serving', async () => {
  const { dp, key } = await tlsDataPlane('half-written');
  try {
    const before = await servedSerial(dp);
    await copyFile(renewed.serverKey, key); // the new key, the old certificate: not a pair
    process.kill(dp.process.pid, 'SIGHUP');
    await pollUntil(
      async () => (dp.process.lines().some((l) => l.json?.msg === 'certificate reload refused; keeping the previous certificate') ? true : undefined),
      {
        what: 'the refused reload to be logged',
        details: () => dp.recentLogs(),
      },
    );
    expect(dp.recentLogs()).toContain('PROXY_TLS_KEY');
    expect(await servedSerial(dp)).toBe(before);
    expect((await httpRequest(`${httpsUrl(dp)}/over-tls/still`, { ca: await readFile(certs.caCert) })).status).toBe(200);
  } finally {
    expect((await dp.stop()).code).toBe(0);
  }
});

test.each([
  [
    'a certificate file that does not exist',
    () => ({ PROXY_TLS_CERT: join(certs.dir, 'missing.crt'), PROXY_TLS_KEY: certs.serverKey }),
    'PROXY_TLS_CERT: cannot read',
  ],
  ["a key that is not the certificate's", () => ({ PROXY_TLS_CERT: certs.serverCert, PROXY_TLS_KEY: renewed.serverKey }), 'PROXY_TLS_KEY:'],
  ['a certificate without its key', () => ({ PROXY_TLS_CERT: certs.serverCert }), 'PROXY_TLS_CERT: needs PROXY_TLS_KEY (both or neither)'],
  [
    'a redirect to HTTPS without HTTPS',
    () => ({ PROXY_HTTP_REDIRECT_PORT: '0' }),
    'PROXY_HTTP_REDIRECT_PORT: redirects to HTTPS: it needs PROXY_TLS_CERT and PROXY_TLS_KEY',
  ],
])('%s: the data plane does not start, and says which setting is wrong', async (_name, tlsEnv, message) => {
  await expectDataPlaneRefusesToStart(cp.grpcAddr, tlsEnv(), message);
});
