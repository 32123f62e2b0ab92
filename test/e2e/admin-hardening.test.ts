/**
 * The admin API hardened, on the built CP process over real sockets: login
 * throttling (429 + Retry-After, success after the wait), the read-only viewer role, tokens
 * invalidated by a password or token-secret change (CP restarted on the same DATA_DIR), and the
 * admin listener over HTTPS (ADMIN_TLS_CERT / ADMIN_TLS_KEY).
 */
import { readFile } from 'node:fs/promises';
import { apiDefinition } from '../helpers/api-definition.js';
import { createAdminClient } from '../helpers/admin-client.js';
import { httpRequest } from '../helpers/http-request.js';
import { delay } from '../helpers/poll-until.js';
import { startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';
import { createTestCertificates, type CertificateFiles } from '../helpers/test-certificates.js';

const started: ControlPlane[] = [];
afterEach(async () => {
  const codes: Array<number | null> = [];
  for (const cp of started.splice(0).reverse()) {
    if (cp.process.running()) codes.push((await cp.stop()).code);
    await cp.dispose();
  }
  expect(codes).toEqual(codes.map(() => 0));
});

async function start(env: Record<string, string>, dataDir?: string): Promise<ControlPlane> {
  const cp = await startControlPlane({ env, dataDir });
  started.push(cp);
  return cp;
}

const login = (url: string, username: string, password: string, from?: string) =>
  httpRequest(`${url}/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, password }),
    localAddress: from,
  });

const get = (url: string, token: string) => httpRequest(url, { headers: { authorization: `Bearer ${token}` } });

test('login throttling: 401s, then 429 with Retry-After (even for the right password), then success after the wait', async () => {
  const cp = await start({ ADMIN_LOGIN_FREE_FAILURES: '2', ADMIN_LOGIN_BACKOFF_BASE: '1s', ADMIN_LOGIN_BACKOFF_MAX: '4s' });
  expect((await login(cp.adminUrl, cp.username, 'wrong')).status).toBe(401);
  expect((await login(cp.adminUrl, cp.username, 'wrong')).status).toBe(401);
  const throttled = await login(cp.adminUrl, cp.username, cp.password);
  expect(throttled.status).toBe(429);
  expect(throttled.headers['retry-after']).toBe('1');
  expect(throttled.json).toEqual({ error: 'too many failed logins; retry later' });

  await delay(Number(throttled.headers['retry-after']) * 1000 + 100);
  const ok = await login(cp.adminUrl, cp.username, cp.password);
  expect(ok.status).toBe(200);
  // The success reset the count: one more failure is a plain 401.
  expect((await login(cp.adminUrl, cp.username, 'wrong')).status).toBe(401);
});

test('failed logins from other addresses do not lock the user out of a clean address, and guessing stays slow', async () => {
  const cp = await start({
    ADMIN_LOGIN_FREE_FAILURES: '3',
    ADMIN_LOGIN_BACKOFF_BASE: '30s',
    ADMIN_LOGIN_BACKOFF_MAX: '1m',
    ADMIN_LOGIN_USER_BURST: '3',
    ADMIN_LOGIN_USER_REFILL: '1h',
  });
  // Attackers on four loopback addresses, each within its own free failures: the first three empty
  // the user's budget; the fourth, never failed before, is still heard once.
  const attackers = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'];
  const first = [];
  for (const from of attackers) first.push((await login(cp.adminUrl, cp.username, `guess-${from}`, from)).status);
  expect(first).toEqual([401, 401, 401, 401]);

  // Guessing stays slow: an address that has failed gets no more answers for this user name.
  const burst = [];
  for (const from of attackers) for (let i = 0; i < 3; i++) burst.push(await login(cp.adminUrl, cp.username, `again-${i}`, from));
  expect(burst.map((r) => r.status)).toEqual(burst.map(() => 429));
  expect(Number(burst[0]!.headers['retry-after'])).toBeGreaterThan(3000);
  // Even the right password: the attacker's address is not heard.
  expect((await login(cp.adminUrl, cp.username, cp.password, '127.0.0.2')).status).toBe(429);

  // The admin's clean address logs in at once, with the right password.
  expect((await login(cp.adminUrl, cp.username, cp.password, '127.0.0.9')).status).toBe(200);
  // A clean address guessing gets one answer, and is then spent.
  expect((await login(cp.adminUrl, cp.username, 'wrong', '127.0.0.10')).status).toBe(401);
  expect((await login(cp.adminUrl, cp.username, cp.password, '127.0.0.10')).status).toBe(429);
});

test('viewer role: reads 200, every write 403, nothing changes', async () => {
  const cp = await start({ ADMIN_VIEWER_USER: 'auditor', ADMIN_VIEWER_PASSWORD: 'auditor-password-123' });
  const admin = await createAdminClient(cp);
  expect((await admin.createApi(apiDefinition({ name: 'kept', listenPath: '/kept/*', targets: ['http://127.0.0.1:9'] }))).status).toBe(201);
  const viewer = await createAdminClient({ adminUrl: cp.adminUrl, username: 'auditor', password: 'auditor-password-123' });

  expect((await viewer.listApis()).status).toBe(200);
  expect((await viewer.getApi('kept')).status).toBe(200);
  expect((await viewer.dataplanes()).status).toBe(200);
  const writes = [
    await viewer.createApi(apiDefinition({ name: 'new', listenPath: '/new/*', targets: ['http://127.0.0.1:9'] })),
    await viewer.updateApi('kept', { active: false }),
    await viewer.patchApi('kept', { active: false }),
    await viewer.deleteApi('kept'),
    await viewer.deleteOAuthServer('any'),
  ];
  expect(writes.map((w) => [w.status, w.body])).toEqual(writes.map(() => [403, { error: 'this account is read-only (viewer)' }]));
  expect((await admin.listApis()).body).toEqual([expect.objectContaining({ name: 'kept', active: true })]);
});

describe('changing a credential invalidates earlier tokens (CP restarted on the same DATA_DIR)', () => {
  test.each<{ row: string; change: Record<string, string>; status: number }>([
    { row: 'same password and secret: the token still works', change: {}, status: 200 },
    { row: 'new ADMIN_PASSWORD: 401', change: { ADMIN_PASSWORD: 'a-brand-new-password' }, status: 401 },
    { row: 'new ADMIN_JWT_SECRET: 401', change: { ADMIN_JWT_SECRET: 'another-token-secret-of-32-bytes!!' }, status: 401 },
  ])('$row', async ({ change, status }) => {
    const first = await start({ ADMIN_PASSWORD: 'the-first-password' });
    const token = (await createAdminClient(first)).token;
    expect((await get(`${first.adminUrl}/apis`, token)).status).toBe(200);
    expect((await first.stop()).code).toBe(0);

    const second = await start({ ADMIN_PASSWORD: 'the-first-password', ...change }, first.dataDir);
    const res = await get(`${second.adminUrl}/apis`, token);
    expect(res.status).toBe(status);
    if (status === 401) expect(res.headers['www-authenticate']).toBe('Bearer');
  });
});

describe('admin listener over HTTPS', () => {
  let certs: CertificateFiles;
  beforeAll(async () => {
    certs = await createTestCertificates();
  });
  afterAll(() => certs?.dispose());

  test('login and reads over https with the test CA; plain http is not served', async () => {
    const cp = await start({ ADMIN_TLS_CERT: certs.serverCert, ADMIN_TLS_KEY: certs.serverKey });
    const listening = cp.process.lines().find((l) => l.json?.msg === 'listening' && l.json?.listener === 'admin');
    expect(listening?.json?.tls).toBe(true);
    const httpsUrl = cp.adminUrl.replace(/^http:/, 'https:');
    const ca = await readFile(certs.caCert);

    expect((await httpRequest(`${httpsUrl}/healthz`, { ca })).status).toBe(200);
    const res = await httpRequest(`${httpsUrl}/login`, {
      ca,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: cp.username, password: cp.password }),
    });
    expect(res.status).toBe(200);
    const token = (res.json as { access_token: string }).access_token;
    expect((await httpRequest(`${httpsUrl}/apis`, { ca, headers: { authorization: `Bearer ${token}` } })).json).toEqual([]);

    await expect(httpRequest(`${httpsUrl}/healthz`)).rejects.toThrow(/certificate/);
    await expect(httpRequest(`${cp.adminUrl}/healthz`, { timeoutMs: 2_000 })).rejects.toThrow();
  });
});
