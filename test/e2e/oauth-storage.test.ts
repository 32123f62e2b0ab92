/**
 * OAuth 2.0 storage token strategy (docs/oauth2.md "OAuth 2.0"), end to end: two real data planes share one real
 * redis-server (REDIS_URL); a real authorization service issues opaque tokens through the proxied
 * token endpoint; refresh and revoke go through the gateway as well. Plus the in-process store
 * (REDIS_URL unset) and a Redis outage, during which the data plane fails closed and stays up.
 */
import { apiDefinition } from '../helpers/api-definition.js';
import { startAuthService, type AuthService } from '../helpers/auth-service.js';
import { httpRequest, type HttpResponse } from '../helpers/http-request.js';
import { delay, pollUntil } from '../helpers/poll-until.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import type { DataPlane } from '../helpers/start-data-plane.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

const SERVER = 'store';
const DEFAULT_TTL = 1;

let upstream: Upstream;
let auth: AuthService;

function storageServer(authUrl: string): Record<string, unknown> {
  const endpoint = (name: string) => ({
    listen_path: `/oauth/${SERVER}/${name}`,
    upstreams: { balancing: 'roundrobin', targets: [{ target: `${authUrl}/${name}` }] },
    methods: ['POST'],
  });
  return {
    name: SERVER,
    oauth_endpoints: { token: endpoint('token'), revoke: endpoint('revoke') },
    token_strategy: { name: 'storage', settings: { default_ttl: DEFAULT_TTL } },
  };
}

async function configure(gw: Gateway): Promise<void> {
  expect((await gw.admin.createOAuthServer(storageServer(auth.url))).status).toBe(201);
  const write = await gw.admin.createApi(
    apiDefinition({
      name: 'stored-api',
      listenPath: '/api/*',
      targets: [upstream.url],
      plugins: [{ name: 'oauth2', enabled: true, config: { server_name: SERVER } }],
    }),
  );
  expect(write.status).toBe(201);
  await gw.admin.waitForDataPlanes(write, gw.dps);
}

const form = { 'content-type': 'application/x-www-form-urlencoded' };

interface TokenResponse {
  access_token: string;
  refresh_token?: string;
  expires_in?: number;
  token_type: string;
}

async function clientCredentials(dp: DataPlane): Promise<TokenResponse> {
  const res = await dp.request('POST', `/oauth/${SERVER}/token`, {
    headers: form,
    body: `grant_type=client_credentials&client_id=${auth.clientId}&client_secret=${auth.clientSecret}`,
  });
  expect(res.status).toBe(200);
  return res.json as TokenResponse;
}

async function refreshGrant(dp: DataPlane, refreshToken: string): Promise<TokenResponse> {
  const res = await dp.request('POST', `/oauth/${SERVER}/token`, {
    headers: form,
    body: `grant_type=refresh_token&refresh_token=${encodeURIComponent(refreshToken)}`,
  });
  expect(res.status).toBe(200);
  return res.json as TokenResponse;
}

async function revoke(dp: DataPlane, token: string): Promise<void> {
  const res = await dp.request('POST', `/oauth/${SERVER}/revoke`, { headers: form, body: `token=${encodeURIComponent(token)}` });
  expect(res.status).toBe(200);
}

function callApi(dp: DataPlane, token: string): Promise<HttpResponse> {
  return dp.request('GET', '/api/resource', { headers: { authorization: `Bearer ${token}` } });
}

async function statusOn(dp: DataPlane, token: string): Promise<number> {
  return (await callApi(dp, token)).status;
}

function expectRejected(res: HttpResponse): void {
  expect({ status: res.status, body: res.text, contentType: res.headers['content-type'] }).toEqual({
    status: 401,
    body: '"access token not authorized"',
    contentType: 'application/json',
  });
}

beforeAll(async () => {
  upstream = await startUpstream('storage-upstream', { kind: 'echo' });
  auth = await startAuthService({ kind: 'opaque', expiresIn: 300, refresh: true });
});

afterAll(async () => {
  await upstream?.close();
  await auth?.close();
});

describe('shared Redis store, two data planes', () => {
  let redis: RedisServer;
  let gw: Gateway;
  let dp1: DataPlane;
  let dp2: DataPlane;

  beforeAll(async () => {
    redis = await startRedisServer();
    gw = await startGateway({ dataPlanes: 2, dataPlaneEnv: { REDIS_URL: redis.url } });
    [dp1, dp2] = gw.dps;
    await configure(gw);
  }, 60_000);

  afterAll(async () => {
    const problems = gw ? await gw.stop() : '';
    await redis?.stop();
    expect(problems).toBe('');
  });

  beforeEach(() => auth.setMode({ kind: 'opaque', expiresIn: 300, refresh: true }));

  test('the proxied token endpoint returns the token response unchanged', async () => {
    const before = auth.requests.length;
    const token = await clientCredentials(dp1);
    const issued = auth.issued[auth.issued.length - 1];
    expect(token).toEqual({ access_token: issued.accessToken, refresh_token: issued.refreshToken, token_type: 'Bearer', expires_in: 300 });
    expect(auth.requests.slice(before).map((r) => r.url)).toEqual(['/token']);
  });

  test('a token obtained through DP 1 is accepted at once by DP 1 and by DP 2', async () => {
    const { access_token } = await clientCredentials(dp1);
    const res = await callApi(dp1, access_token);
    expect(res.status).toBe(200);
    expect((res.json as { headers: Record<string, string> }).headers.authorization).toBe(`Bearer ${access_token}`);
    expect(await statusOn(dp2, access_token)).toBe(200);
  });

  test('an unknown token is rejected by both', async () => {
    expectRejected(await callApi(dp1, 'never-issued'));
    expectRejected(await callApi(dp2, 'never-issued'));
  });

  test('expiry after expires_in: 1', async () => {
    auth.setMode({ kind: 'opaque', expiresIn: 1, refresh: false });
    const { access_token, expires_in } = await clientCredentials(dp1);
    expect(expires_in).toBe(1);
    expect(await statusOn(dp2, access_token)).toBe(200);
    await delay(1_500);
    expectRejected(await callApi(dp1, access_token));
    expectRejected(await callApi(dp2, access_token));
  });

  test('a response without expires_in is kept for default_ttl', async () => {
    auth.setMode({ kind: 'opaque', expiresIn: null, refresh: false });
    const token = await clientCredentials(dp2);
    expect(token.expires_in).toBeUndefined();
    expect(await statusOn(dp1, token.access_token)).toBe(200);
    await delay(DEFAULT_TTL * 1000 + 500);
    expectRejected(await callApi(dp1, token.access_token));
  });

  test('a refresh grant (through the other DP) replaces the old access token', async () => {
    const first = await clientCredentials(dp1);
    expect(first.refresh_token).toEqual(expect.any(String));
    expect(await statusOn(dp2, first.access_token)).toBe(200);

    const second = await refreshGrant(dp2, first.refresh_token!);
    expect(second.access_token).not.toBe(first.access_token);
    expectRejected(await callApi(dp1, first.access_token));
    expectRejected(await callApi(dp2, first.access_token));
    expect(await statusOn(dp1, second.access_token)).toBe(200);
    expect(await statusOn(dp2, second.access_token)).toBe(200);
  });

  test('revoking the access token removes it on every DP', async () => {
    const { access_token } = await clientCredentials(dp1);
    expect(await statusOn(dp2, access_token)).toBe(200);
    await revoke(dp2, access_token);
    expect(auth.revoked.has(access_token)).toBe(true);
    expectRejected(await callApi(dp1, access_token));
    expectRejected(await callApi(dp2, access_token));
  });

  test('revoking the refresh token removes the access token it came with', async () => {
    const { access_token, refresh_token } = await clientCredentials(dp1);
    expect(await statusOn(dp1, access_token)).toBe(200);
    await revoke(dp1, refresh_token!);
    expectRejected(await callApi(dp2, access_token));
  });

  test('Redis unreachable: requests fail closed with 401, the DP stays up, and recovers with Redis', async () => {
    const { access_token } = await clientCredentials(dp1);
    expect(await statusOn(dp1, access_token)).toBe(200);

    await redis.stop();
    const started = Date.now();
    expectRejected(await callApi(dp1, access_token));
    expectRejected(await callApi(dp2, access_token));
    expect(Date.now() - started).toBeLessThan(8_000); // fails closed instead of hanging
    // Token endpoint still proxied: only the bookkeeping fails.
    expect((await clientCredentials(dp1)).access_token).toEqual(expect.any(String));
    for (const dp of [dp1, dp2]) {
      expect(dp.process.running()).toBe(true);
      expect((await httpRequest(`${dp.statusUrl}/healthz`)).status).toBe(200);
    }

    // Same port, empty (no persistence): the DPs reconnect on their own.
    redis = await startRedisServer({ port: redis.port });
    const fresh = await pollUntil(
      async () => {
        const t = await clientCredentials(dp1);
        return (await statusOn(dp2, t.access_token)) === 200 ? t : undefined;
      },
      { what: 'the data planes to use the restarted redis', timeoutMs: 15_000, intervalMs: 250, details: () => dp1.recentLogs() },
    );
    expect(await statusOn(dp1, fresh.access_token)).toBe(200);
  });
});

describe('in-process store (REDIS_URL unset)', () => {
  let gw: Gateway;

  beforeAll(async () => {
    gw = await startGateway();
    await configure(gw);
  }, 60_000);

  afterAll(async () => {
    const problems = gw ? await gw.stop() : '';
    expect(problems).toBe('');
  });

  test('token, refresh and revoke work within one DP', async () => {
    auth.setMode({ kind: 'opaque', expiresIn: 300, refresh: true });
    const first = await clientCredentials(gw.dp);
    expect(await statusOn(gw.dp, first.access_token)).toBe(200);
    expectRejected(await callApi(gw.dp, 'never-issued'));

    const second = await refreshGrant(gw.dp, first.refresh_token!);
    expectRejected(await callApi(gw.dp, first.access_token));
    expect(await statusOn(gw.dp, second.access_token)).toBe(200);

    await revoke(gw.dp, second.access_token);
    expectRejected(await callApi(gw.dp, second.access_token));
  });
});
