/**
 * Mutual TLS on the proxy listener (PROXY_TLS_CLIENT_CA, docs/proxy.md "Proxy behaviour"): a real data plane lets in
 * only clients with a certificate its CA signed, over HTTP/1.1 and h2, tells the upstream who they are in
 * X-Forwarded-Client-Cert (a client's own copy never goes upstream, mutual TLS or not), takes a new CA on
 * SIGHUP; PROXY_TLS_MIN_VERSION=TLSv1.3 refuses TLS 1.2 clients; bad settings stop the start, named.
 */
import { X509Certificate } from 'node:crypto';
import { copyFile, readFile } from 'node:fs/promises';
import { connect as connectHttp2 } from 'node:http2';
import { join } from 'node:path';
import { createAdminClient, type AdminClient } from '../helpers/admin-client.js';
import { apiDefinition } from '../helpers/api-definition.js';
import { httpRequest, type HttpRequestOptions } from '../helpers/http-request.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';
import { expectDataPlaneRefusesToStart, startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { createTestCertificates, type CertificateFiles } from '../helpers/test-certificates.js';
import { startUpstream, type RecordedRequest, type Upstream } from '../helpers/upstream-server.js';

let certs: CertificateFiles;
let ca: Buffer;
let cp: ControlPlane;
let admin: AdminClient;
let u: Upstream;
/** PROXY_TLS_CLIENT_CA is a copy of the test CA, which a test may replace. */
let clientCa: string;
let dp: DataPlane;

beforeAll(async () => {
  certs = await createTestCertificates();
  ca = await readFile(certs.caCert);
  u = await startUpstream('mtls-upstream', { kind: 'echo' });
  cp = await startControlPlane();
  admin = await createAdminClient(cp);
  expect((await admin.createApi(apiDefinition({ name: 'mtls', listenPath: '/mtls/*', targets: [u.url] }))).status).toBe(201);
  clientCa = join(certs.dir, 'client-ca.crt');
  await copyFile(certs.caCert, clientCa);
  dp = await startDataPlane({
    controlPlaneAddr: cp.grpcAddr,
    env: { PROXY_TLS_CERT: certs.serverCert, PROXY_TLS_KEY: certs.serverKey, PROXY_TLS_CLIENT_CA: clientCa, TLS_RELOAD_INTERVAL: '1h' },
  });
}, 60_000);

afterAll(async () => {
  await dp?.stop();
  await cp?.dispose();
  await u?.close();
  await certs?.dispose();
});

const url = (d: DataPlane, path: string) => `https://localhost:${d.proxyPort}${path}`;
const withCert = async (cert: string, key: string): Promise<HttpRequestOptions> => ({ ca, cert: await readFile(cert), key: await readFile(key) });
/** What Envoy writes for this certificate file (the test client's has a SPIFFE URI and a DNS name). */
async function xfccOf(cert: string): Promise<string> {
  const x509 = new X509Certificate(await readFile(cert));
  return `Hash=${x509.fingerprint256.replace(/:/g, '').toLowerCase()};Subject="${x509.subject.split('\n').join(',')}";URI=spiffe://gatehouse.test/ns/default/sa/client;DNS=client.gatehouse.test`;
}

test("a client with a certificate of the CA gets through; the upstream gets X-Forwarded-Client-Cert, never the client's own", async () => {
  const listening = dp.process.lines().find((l) => l.json?.msg === 'listening' && l.json?.listener === 'proxy');
  expect(listening?.json).toMatchObject({ tls: true, clientCertificates: true });
  const res = await httpRequest(url(dp, '/mtls/a'), {
    ...(await withCert(certs.clientCert, certs.clientKey)),
    headers: { 'x-forwarded-client-cert': 'Hash=forged' },
  });
  expect(res.status).toBe(200);
  const seen = res.json as RecordedRequest;
  expect(seen.url).toBe('/mtls/a');
  expect(seen.headers['x-forwarded-client-cert']).toBe(await xfccOf(certs.clientCert));
  expect(seen.rawHeaders.filter((name, i) => i % 2 === 0 && name.toLowerCase() === 'x-forwarded-client-cert')).toHaveLength(1);
});

test.each([
  ['no certificate', async () => ({ ca })],
  ['a certificate of another CA', async () => withCert(certs.rogueClientCert, certs.rogueClientKey)],
])('a client with %s fails the handshake and reaches nothing', async (_name, options) => {
  const before = u.requests.length;
  await expect(httpRequest(url(dp, '/mtls/refused'), await options())).rejects.toThrow();
  expect(u.requests.length).toBe(before);
});

test('over h2 as over HTTP/1.1: the certificate lets the client in and goes upstream', async () => {
  const session = connectHttp2(`https://localhost:${dp.proxyPort}`, { ca, cert: await readFile(certs.clientCert), key: await readFile(certs.clientKey) });
  try {
    const body = await new Promise<string>((resolve, reject) => {
      const stream = session.request({ ':path': '/mtls/h2' });
      let text = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => (text += chunk));
      stream.on('end', () => resolve(text));
      stream.on('error', reject);
    });
    const seen = JSON.parse(body) as RecordedRequest;
    expect(seen.url).toBe('/mtls/h2');
    expect(seen.headers['x-forwarded-client-cert']).toBe(await xfccOf(certs.clientCert));
  } finally {
    session.close();
  }
});

test("a data plane without PROXY_TLS_CLIENT_CA asks for no certificate, and still drops a client's X-Forwarded-Client-Cert", async () => {
  const own = await startDataPlane({ controlPlaneAddr: cp.grpcAddr, env: { PROXY_TLS_CERT: certs.serverCert, PROXY_TLS_KEY: certs.serverKey } });
  try {
    const res = await httpRequest(url(own, '/mtls/plain'), { ca, headers: { 'x-forwarded-client-cert': 'Hash=forged' } });
    expect(res.status).toBe(200);
    expect((res.json as RecordedRequest).headers['x-forwarded-client-cert']).toBeUndefined();
  } finally {
    await own.stop();
  }
});

test('a new PROXY_TLS_CLIENT_CA is taken on SIGHUP: certificates of the new CA get in, those of the old one no longer', async () => {
  const own = join(certs.dir, 'own-client-ca.crt');
  await copyFile(certs.caCert, own);
  const d = await startDataPlane({
    controlPlaneAddr: cp.grpcAddr,
    env: { PROXY_TLS_CERT: certs.serverCert, PROXY_TLS_KEY: certs.serverKey, PROXY_TLS_CLIENT_CA: own, TLS_RELOAD_INTERVAL: '1h' },
  });
  try {
    const rogue = await withCert(certs.rogueClientCert, certs.rogueClientKey);
    const good = await withCert(certs.clientCert, certs.clientKey);
    expect((await httpRequest(url(d, '/mtls/before'), good)).status).toBe(200);
    await copyFile(certs.rogueCaCert, own);
    process.kill(d.process.pid, 'SIGHUP');
    await pollUntil(async () => ((await httpRequest(url(d, '/mtls/after'), rogue)).status === 200 ? true : undefined), {
      what: 'the rogue CA to be trusted after SIGHUP',
      timeoutMs: 10_000,
    });
    await expect(httpRequest(url(d, '/mtls/old'), good)).rejects.toThrow();
  } finally {
    await d.stop();
  }
});

test('PROXY_TLS_MIN_VERSION=TLSv1.3 refuses a TLS 1.2 client; TLS 1.3 gets in', async () => {
  const d = await startDataPlane({
    controlPlaneAddr: cp.grpcAddr,
    env: { PROXY_TLS_CERT: certs.serverCert, PROXY_TLS_KEY: certs.serverKey, PROXY_TLS_MIN_VERSION: 'TLSv1.3' },
  });
  try {
    await expect(httpRequest(url(d, '/mtls/v12'), { ca, maxVersion: 'TLSv1.2' })).rejects.toThrow();
    expect((await httpRequest(url(d, '/mtls/v13'), { ca })).status).toBe(200);
  } finally {
    await d.stop();
  }
});

test.each([
  ['PROXY_TLS_CLIENT_CA without TLS', () => ({ PROXY_TLS_CLIENT_CA: certs.caCert }), 'PROXY_TLS_CLIENT_CA: asks clients for certificates over TLS'],
  [
    'an unreadable PROXY_TLS_CLIENT_CA',
    () => ({ PROXY_TLS_CERT: certs.serverCert, PROXY_TLS_KEY: certs.serverKey, PROXY_TLS_CLIENT_CA: '/nonexistent/ca.crt' }),
    'PROXY_TLS_CLIENT_CA: cannot read /nonexistent/ca.crt',
  ],
  [
    'a PROXY_TLS_CLIENT_CA that is no certificate',
    () => ({ PROXY_TLS_CERT: certs.serverCert, PROXY_TLS_KEY: certs.serverKey, PROXY_TLS_CLIENT_CA: certs.serverKey }),
    'PROXY_TLS_CLIENT_CA: ',
  ],
  [
    'an unknown PROXY_TLS_MIN_VERSION',
    () => ({ PROXY_TLS_CERT: certs.serverCert, PROXY_TLS_KEY: certs.serverKey, PROXY_TLS_MIN_VERSION: 'TLSv1.1' }),
    'PROXY_TLS_MIN_VERSION: expected \\"TLSv1.2\\" or \\"TLSv1.3\\", got \\"TLSv1.1\\"',
  ],
])('%s stops the start, naming the variable', async (_name, env, message) => {
  await expectDataPlaneRefusesToStart(cp.grpcAddr, env(), message);
});
