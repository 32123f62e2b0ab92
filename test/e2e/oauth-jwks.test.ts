/**
 * jwt strategy with a JWKS source (docs/oauth2.md "OAuth 2.0"), end to end: a real JWKS server on loopback serves keys
 * made with jose (generateKeyPair, exportJWK), tokens signed with them go through a real data plane configured by
 * a real control plane, and the JWKS server counts every fetch the data plane makes. Each test has its own
 * JWKS server, OAuth server and API, so none depends on another's fetches.
 */
import { createPublicKey, KeyObject, type JsonWebKey } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { apiDefinition } from '../helpers/api-definition.js';
import { httpRequest, type HttpResponse } from '../helpers/http-request.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { createTestCertificates, type CertificateFiles } from '../helpers/test-certificates.js';
import { stopGatewayAndServers } from '../helpers/stop-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';
import { metricValue } from '../helpers/metric-value.js';
import { pollUntil } from '../helpers/poll-until.js';

let gw: Gateway;
let certs: CertificateFiles;
let upstream: Upstream;
const idps: Upstream[] = [];

interface Key {
  kid: string;
  privateKey: CryptoKey;
  jwk: JWK;
}

async function makeKey(kid: string): Promise<Key> {
  const { publicKey, privateKey } = await generateKeyPair('RS256');
  return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } };
}

const now = () => Math.floor(Date.now() / 1000);
const sign = (key: Key, kid = key.kid) =>
  new SignJWT({ sub: 'client', iat: now(), exp: now() + 300, jti: `${Math.random()}` }).setProtectedHeader({ alg: 'RS256', kid }).sign(key.privateKey);
const jwks = (...keys: Key[]) => ({
  kind: 'fixed' as const,
  body: JSON.stringify({ keys: keys.map((k) => k.jwk) }),
  headers: { 'content-type': 'application/json' },
});
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A JWKS server serving `keys`, an OAuth server fetching it with `settings`, and the API `/api/<name>/*` it protects. */
async function jwksServer(name: string, keys: Key[], settings: Record<string, unknown> = {}, https = false): Promise<Upstream> {
  const tls = https ? { cert: await readFile(certs.serverCert), key: await readFile(certs.serverKey) } : undefined;
  const idp = await startUpstream(`idp-${name}`, keys.length ? jwks(...keys) : { kind: 'fixed', status: 503 }, { tls });
  idps.push(idp);
  const server = await gw.admin.createOAuthServer({
    name,
    oauth_endpoints: { token: { listen_path: `/oauth/${name}/token`, upstreams: { targets: [{ target: `${idp.url}/token` }] } } },
    token_strategy: { name: 'jwt', settings: { jwks_uri: `${idp.url}/.well-known/jwks.json`, algs: ['RS256'], cooldown: '2s', ...settings } },
  });
  expect(server.status).toBe(201);
  const api = await gw.admin.createApi(
    apiDefinition({
      name: `api-${name}`,
      listenPath: `/api/${name}/*`,
      targets: [upstream.url],
      plugins: [{ name: 'oauth2', enabled: true, config: { server_name: name } }],
    }),
  );
  expect(api.status).toBe(201);
  await gw.admin.waitForDataPlanes(api, gw.dps);
  return idp;
}

const callApi = (name: string, token: string): Promise<HttpResponse> =>
  gw.dp.request('GET', `/api/${name}/resource`, { headers: { authorization: `Bearer ${token}` } });

/** Status and the gateway's JSON-string body, to compare with one `toEqual`. */
const answer = (res: HttpResponse) => ({ status: res.status, body: res.json });

/** Fetches of the JWKS document (the idp's /token is never called here). */
const fetches = (idp: Upstream) => idp.requests.filter((r) => r.url === '/.well-known/jwks.json').length;

beforeAll(async () => {
  upstream = await startUpstream('jwks-upstream', { kind: 'echo' });
  certs = await createTestCertificates();
  // The test CA signs the https JWKS server's certificate: trusted as for any HTTPS upstream.
  gw = await startGateway({ dataPlaneEnv: { UPSTREAM_CA_FILE: certs.caCert } });
}, 60_000);

afterAll(async () => {
  expect(await stopGatewayAndServers(gw, upstream, ...idps)).toBe('');
  await certs.dispose();
});

test('a token signed with a key of the JWKS passes; the set is fetched once, when the snapshot arrives', async () => {
  const k1 = await makeKey('k1');
  const idp = await jwksServer('valid', [k1]);
  const before = upstream.requests.length;
  for (let i = 0; i < 3; i++) expect((await callApi('valid', await sign(k1))).status).toBe(200);
  expect(upstream.requests.length).toBe(before + 3);
  expect(fetches(idp)).toBe(1);
  expect(idp.requests[0]!.headers.accept).toBe('application/jwk-set+json, application/json');
});

test('over https, with the certificate checked against the trusted CAs (UPSTREAM_CA_FILE)', async () => {
  const k1 = await makeKey('k1');
  const idp = await jwksServer('https', [k1], {}, true);
  expect(idp.url).toMatch(/^https:/);
  expect((await callApi('https', await sign(k1))).status).toBe(200);
  expect(fetches(idp)).toBe(1);
});

test('rotation: a token with a kid the IdP added since is accepted after the one refetch its unknown kid triggers', async () => {
  const [k1, k2] = [await makeKey('k1'), await makeKey('k2')];
  const idp = await jwksServer('rotation', [k1]);
  expect((await callApi('rotation', await sign(k1))).status).toBe(200);
  idp.setBehaviour(jwks(k1, k2));
  await sleep(2100); // the cooldown since the first fetch
  expect((await callApi('rotation', await sign(k2))).status).toBe(200);
  expect(fetches(idp)).toBe(2);
  expect((await callApi('rotation', await sign(k1))).status).toBe(200);
  expect(fetches(idp)).toBe(2);
});

test('a flood of forged kids makes at most one fetch per cooldown, and every forged token is refused 401', async () => {
  const [k1, forger] = [await makeKey('k1'), await makeKey('forger')];
  const idp = await jwksServer('forged', [k1]);
  await sleep(2100);
  const answers = await Promise.all(Array.from({ length: 30 }, async (_, i) => callApi('forged', await sign(forger, `forged-${i}`))));
  for (const res of answers) expect(answer(res)).toEqual({ status: 401, body: 'access token not authorized' });
  expect(fetches(idp)).toBe(2);
  // Still inside the cooldown the refetch started: more forged kids fetch nothing.
  for (let i = 0; i < 5; i++)
    expect(answer(await callApi('forged', await sign(forger, `again-${i}`)))).toEqual({ status: 401, body: 'access token not authorized' });
  expect(fetches(idp)).toBe(2);
});

test('IdP down after the first fetch: tokens keep passing on the last good set while refreshes fail', async () => {
  const k1 = await makeKey('k1');
  const idp = await jwksServer('down-later', [k1], { cache_ttl: '1s', cooldown: '1s', max_stale: '1h' });
  expect((await callApi('down-later', await sign(k1))).status).toBe(200);
  idp.setBehaviour({ kind: 'fixed', status: 503 });
  await sleep(1200);
  expect((await callApi('down-later', await sign(k1))).status).toBe(200); // starts the refresh that fails
  await sleep(1200);
  expect((await callApi('down-later', await sign(k1))).status).toBe(200);
  expect(fetches(idp)).toBeGreaterThanOrEqual(2);
});

test('metrics: the fetches by outcome, and the keys each server holds under its name', async () => {
  const fetched = (outcome: string) => metricValue(gw.dp.statusUrl, `gatehouse_jwks_fetches_total{outcome="${outcome}"}`);
  const before = { ok: await fetched('ok'), failed: await fetched('failed') };
  const [k1, k2] = [await makeKey('k1'), await makeKey('k2')];
  await jwksServer('metered', [k1, k2]);
  await jwksServer('metered-down', [], { cooldown: '1h' });
  // Both sets are fetched when the snapshot names them; the one that failed holds no keys.
  await pollUntil(async () => ((await fetched('ok')) > before.ok && (await fetched('failed')) > before.failed ? true : undefined), {
    what: 'both fetches counted',
    timeoutMs: 5_000,
  });
  expect(await fetched('ok')).toBe(before.ok + 1);
  const keys = (await httpRequest(`${gw.dp.statusUrl}/metrics`)).body
    .toString()
    .split('\n')
    .filter((l) => /^gatehouse_jwks_keys\{server="metered/.test(l));
  expect(keys.sort()).toEqual(['gatehouse_jwks_keys{server="metered"} 2', 'gatehouse_jwks_keys{server="metered-down"} 0']);
});

test('IdP down from the start: 503 "token signing keys unavailable", never a pass, and no fetch per request', async () => {
  const k1 = await makeKey('k1');
  const idp = await jwksServer('down', [], { cooldown: '1h' });
  const before = upstream.requests.length;
  for (let i = 0; i < 5; i++) expect(answer(await callApi('down', await sign(k1)))).toEqual({ status: 503, body: 'token signing keys unavailable' });
  expect(upstream.requests.length).toBe(before);
  expect(fetches(idp)).toBe(1);
});

test.each<[string, (k: Key) => Promise<string>]>([
  [
    'alg none',
    async () =>
      `${Buffer.from('{"alg":"none","kid":"k1"}').toString('base64url')}.${Buffer.from(JSON.stringify({ sub: 'x', exp: now() + 300 })).toString('base64url')}.`,
  ],
  [
    'HS256 signed with the JWKS public key (alg confusion)',
    async (k) => {
      const pem = createPublicKey({ key: k.jwk as JsonWebKey, format: 'jwk' }).export({ type: 'spki', format: 'pem' }) as string;
      return new SignJWT({ sub: 'x', exp: now() + 300 }).setProtectedHeader({ alg: 'HS256', kid: 'k1' }).sign(new TextEncoder().encode(pem));
    },
  ],
  // The same RSA key (as a KeyObject, which jose lets sign with any RS alg; the CryptoKey is bound to SHA-256).
  [
    'RS384 with a key published for RS256 only',
    (k) => new SignJWT({ sub: 'x', exp: now() + 300 }).setProtectedHeader({ alg: 'RS384', kid: 'k1' }).sign(KeyObject.from(k.privateKey)),
  ],
])('%s is refused 401; only a kid the set lacks (not an alg outside algs) asks the IdP again', async (name, make) => {
  const k1 = await makeKey('k1');
  const server = `confusion-${name.split(' ')[0]!.toLowerCase()}`;
  const idp = await jwksServer(server, [k1], { algs: ['RS256', 'RS384'] });
  expect((await callApi(server, await sign(k1))).status).toBe(200);
  await sleep(2100);
  expect(answer(await callApi(server, await make(k1)))).toEqual({ status: 401, body: 'access token not authorized' });
  expect(fetches(idp)).toBe(name.startsWith('RS384') ? 2 : 1);
});

test('the admin API refuses a plain-http JWKS URI to a remote host and an HMAC alg, naming the field', async () => {
  const create = (settings: object) =>
    gw.admin.createOAuthServer({
      name: 'refused',
      oauth_endpoints: { token: { listen_path: '/oauth/refused/token', upstreams: { targets: [{ target: 'http://127.0.0.1:1/token' }] } } },
      token_strategy: { name: 'jwt', settings },
    });
  const http = await create({ jwks_uri: 'http://idp.example/jwks' });
  expect({ status: http.status, body: http.body }).toEqual({
    status: 400,
    body: { error: 'token_strategy.settings.jwks_uri must be https (http only for a loopback host, or with allow_http: true)' },
  });
  const hmac = await create({ jwks_uri: 'https://idp.example/jwks', algs: ['HS256'] });
  expect({ status: hmac.status, body: hmac.body }).toEqual({
    status: 400,
    body: { error: 'token_strategy.settings.algs[0] must be one of RS256, RS384, RS512, ES256, ES384 (a JWKS holds public keys only)' },
  });
  expect((await gw.admin.getOAuthServer('refused')).status).toBe(404);
});
