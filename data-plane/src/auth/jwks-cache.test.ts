/**
 * The JWKS cache against a real node:http JWKS server on loopback, through real upstream pools; the clock is
 * injected so cooldown, cache_ttl and max_stale are crossed without sleeping. Every fetch is counted at the server.
 */
import { generateKeyPairSync } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { compileJwks } from '#proto/compile/jwks';
import { isGatehouseError } from '#proto/errors';
import { createUpstreamPools, type UpstreamPools } from '../proxy/upstream-pools.js';
import { createJwksCache, MAX_JWKS_BYTES, type JwksCache } from './jwks-cache.js';
import { Registry } from 'prom-client';
import { createFetchMetrics } from './fetch-metrics.js';
import { pollUntil } from '../../../test/helpers/poll-until.js';

const jwk = (kid: string) => ({ ...generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' }), kid });
const K1 = jwk('k1');
const K2 = jwk('k2');

let server: Server;
let answer: { status: number; body: string };
let fetches = 0;
let pools: UpstreamPools;
let clock: number;
let cache: JwksCache;

const serve = (keys: object[]) => (answer = { status: 200, body: JSON.stringify({ keys }) });
const config = () =>
  compileJwks('idp', {
    jwks_uri: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`,
    algs: ['ES256'],
    cache_ttl: '60s',
    timeout: '2s',
    cooldown: '10s',
    max_stale: '120s',
    allow_http: false,
  });
const kids = async (kid: string | undefined) => (await cache.keysFor(config(), 'ES256', kid)).map((k) => k.kid);
const refusal = async (kid: string) => {
  try {
    await cache.keysFor(config(), 'ES256', kid);
  } catch (err) {
    return isGatehouseError(err) ? `${err.code}: ${err.message}` : String(err);
  }
  return 'no refusal';
};

beforeAll(async () => {
  server = createServer((_req, res) => {
    fetches++;
    res.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

beforeEach(() => {
  fetches = 0;
  clock = 1_000_000;
  pools = createUpstreamPools();
  cache = createJwksCache({ pools, now: () => clock });
  serve([K1]);
});
afterEach(() => pools.close());

test('the first lookup waits for the fetch; concurrent lookups share it; later ones use the held set', async () => {
  expect(await Promise.all([kids('k1'), kids('k1'), kids(undefined)])).toEqual([['k1'], ['k1'], ['k1']]);
  expect(await kids('k1')).toEqual(['k1']);
  expect(fetches).toBe(1);
});

test('a JWK the set cannot use is logged with its reason, as a warning when it is broken', async () => {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString('utf8')));
      done();
    },
  });
  cache = createJwksCache({ pools, now: () => clock, logger: pino({ level: 'info' }, sink) });
  serve([K1, { kty: 'EC', crv: 'P-256', x: 'AAAA', y: 'AAAA', kid: 'bad' }, { ...K2, use: 'enc' }]);
  expect(await kids(undefined)).toEqual(['k1']);
  expect(lines.find((l) => l.msg === 'JWKS fetched')).toMatchObject({
    level: 40,
    keys: 1,
    ignored: [
      { key: 'keys[1]', kid: 'bad', reason: expect.stringMatching(/^key material not importable: /), broken: true },
      { key: 'keys[2]', kid: 'k2', reason: 'use is "enc", not "sig"', broken: false },
    ],
  });
});

test('an unknown kid refetches once per cooldown, however many ask', async () => {
  await kids('k1');
  clock += 10_000;
  serve([K1, K2]);
  expect(await kids('k2')).toEqual(['k2']);
  expect(fetches).toBe(2);
  const forged = await Promise.all(Array.from({ length: 50 }, (_, i) => kids(`forged-${i}`)));
  expect(forged.flat()).toEqual([]);
  clock += 9_999;
  expect(await kids('forged-x')).toEqual([]);
  expect(fetches).toBe(2);
  clock += 1;
  expect(await kids('forged-y')).toEqual([]);
  expect(fetches).toBe(3);
});

test('IdP down after the first fetch: the last good set serves until max_stale, fetches stay one per cooldown, then 503', async () => {
  await kids('k1');
  answer = { status: 503, body: 'down' };
  clock += 60_000; // cache_ttl passed: a background refresh, the held set answers meanwhile
  expect(await kids('k1')).toEqual(['k1']);
  await new Promise((r) => setTimeout(r, 100));
  expect(fetches).toBe(2);
  clock += 5_000;
  expect(await kids('k1')).toEqual(['k1']);
  expect(fetches).toBe(2);
  clock += 55_001; // 120.001 s after the good fetch
  expect(await refusal('k1')).toBe('JWKS_UNAVAILABLE: JWKS of oauth server idp unavailable: JWKS URI answered 503');
  expect(fetches).toBe(3);
});

test('IdP down from the start: 503 naming the reason, and no second fetch within the cooldown', async () => {
  answer = { status: 500, body: 'oops' };
  expect(await refusal('k1')).toBe('JWKS_UNAVAILABLE: JWKS of oauth server idp unavailable: JWKS URI answered 500');
  expect(await refusal('k1')).toBe('JWKS_UNAVAILABLE: JWKS of oauth server idp unavailable: JWKS URI answered 500');
  expect(fetches).toBe(1);
  clock += 10_000;
  serve([K1]);
  expect(await kids('k1')).toEqual(['k1']);
  expect(fetches).toBe(2);
});

test.each([
  ['over 256 KiB', () => ({ status: 200, body: JSON.stringify({ keys: [], pad: 'x'.repeat(MAX_JWKS_BYTES) }) }), `response over ${MAX_JWKS_BYTES} bytes`],
  ['not JSON', () => ({ status: 200, body: '<html>' }), 'response is not JSON'],
  ['a JSON array', () => ({ status: 200, body: '[]' }), 'response is not a JSON object'],
  ['no keys array', () => ({ status: 200, body: '{"jwks":[]}' }), 'JWKS is not a JSON object with a "keys" array'],
  [
    'an HMAC key in the set',
    () => ({ status: 200, body: JSON.stringify({ keys: [K1, { kty: 'oct', k: 'c2VjcmV0' }] }) }),
    'JWKS keys[1] is a symmetric (oct) key: a JWKS carries public keys only',
  ],
])('a response %s is no key set, and the set held before stays', async (_name, bad, reason) => {
  answer = bad();
  expect(await refusal('k1')).toBe(`JWKS_UNAVAILABLE: JWKS of oauth server idp unavailable: ${reason}`);
  clock += 10_000;
  serve([K1]);
  expect(await kids('k1')).toEqual(['k1']);
  clock += 10_000;
  answer = bad();
  expect(await kids('k3')).toEqual([]);
  expect(await kids('k1')).toEqual(['k1']);
  expect(fetches).toBe(3);
});

test('retain fetches the sets of a new snapshot at once and forgets the others', async () => {
  cache.retain([config()]);
  await new Promise((r) => setTimeout(r, 200));
  expect(fetches).toBe(1);
  expect(await kids('k1')).toEqual(['k1']);
  expect(fetches).toBe(1);
  cache.retain([]);
  expect(await kids('k1')).toEqual(['k1']);
  expect(fetches).toBe(2);
});

test('metrics: each fetch counted by outcome, and the keys each server holds (0 once past max_stale)', async () => {
  const registry = new Registry();
  const metrics = createFetchMetrics(registry);
  cache = createJwksCache({ pools, now: () => clock, metrics });
  metrics.reportKeysOf(cache);
  const scrape = async () => (await registry.metrics()).split('\n').filter((l) => /^gatehouse_jwks_/.test(l));
  expect(await scrape()).toEqual(['gatehouse_jwks_fetches_total{outcome="ok"} 0', 'gatehouse_jwks_fetches_total{outcome="failed"} 0']);
  serve([K1, K2]);
  cache.retain([config()]);
  await kids('k1');
  expect(await scrape()).toEqual([
    'gatehouse_jwks_fetches_total{outcome="ok"} 1',
    'gatehouse_jwks_fetches_total{outcome="failed"} 0',
    'gatehouse_jwks_keys{server="idp"} 2',
  ]);
  answer = { status: 500, body: '' };
  clock += 60_000;
  await kids('k1'); // past cache_ttl: the background refresh fails, the held set serves
  await pollUntil(async () => ((await scrape()).includes('gatehouse_jwks_fetches_total{outcome="failed"} 1') ? true : undefined), {
    what: 'the failed fetch counted',
    timeoutMs: 5_000,
  });
  expect(await scrape()).toContain('gatehouse_jwks_keys{server="idp"} 2');
  clock += 61_000;
  expect(await scrape()).toContain('gatehouse_jwks_keys{server="idp"} 0');
});
