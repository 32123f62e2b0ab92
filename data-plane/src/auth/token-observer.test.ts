import { gzipSync } from 'node:zlib';
import { createTokenObserver, DEFAULT_TOKEN_TTL, OBSERVED_BODY_LIMIT, parseParams, ttlOf } from './token-observer.js';
import { createMemoryTokenStore, type TokenStore } from './token-store.js';

const JSON_TYPE = { 'content-type': 'application/json; charset=utf-8' };

function clock() {
  let t = 1_700_000_000_000;
  return { now: () => t, advance: (seconds: number) => (t += seconds * 1000) };
}

function silentLogger() {
  const warnings: unknown[] = [];
  return { warnings, logger: { warn: (obj: unknown) => void warnings.push(obj), debug: () => undefined } };
}

/** Runs one request/response pair through an observer, in chunks as the proxy would. */
async function exchange(
  store: TokenStore,
  endpoint: 'token' | 'revoke',
  exchangeSpec: {
    request?: string;
    status?: number;
    headers?: Record<string, string>;
    response?: string | Buffer;
    defaultTtl?: number;
  },
  logger = silentLogger().logger,
): Promise<void> {
  const observer = createTokenObserver({ server: 'auth', endpoint, store, defaultTtl: exchangeSpec.defaultTtl, logger });
  const request = Buffer.from(exchangeSpec.request ?? '');
  // split bodies in two to prove chunks are joined
  observer.requestChunk(request.subarray(0, 5));
  observer.requestChunk(request.subarray(5));
  observer.response(exchangeSpec.status ?? 200, exchangeSpec.headers ?? JSON_TYPE);
  const response = Buffer.isBuffer(exchangeSpec.response) ? exchangeSpec.response : Buffer.from(exchangeSpec.response ?? '');
  observer.responseChunk(response.subarray(0, 7));
  observer.responseChunk(response.subarray(7));
  await observer.finish();
}

const tokenResponse = (body: Record<string, unknown>) => JSON.stringify({ token_type: 'Bearer', ...body });

describe('token endpoint responses', () => {
  test.each<[string, Parameters<typeof exchange>[2], boolean]>([
    ['2xx JSON with access_token is stored', { response: tokenResponse({ access_token: 'A', expires_in: 60 }) }, true],
    ['201 counts as 2xx', { status: 201, response: tokenResponse({ access_token: 'A' }) }, true],
    ['application/vnd+json counts as JSON', { headers: { 'content-type': 'application/vnd.api+json' }, response: tokenResponse({ access_token: 'A' }) }, true],
    ['gzip-encoded response', { headers: { ...JSON_TYPE, 'content-encoding': 'gzip' }, response: gzipSync(tokenResponse({ access_token: 'A' })) }, true],
    ['400 response is ignored', { status: 400, response: tokenResponse({ access_token: 'A' }) }, false],
    ['302 response is ignored', { status: 302, response: tokenResponse({ access_token: 'A' }) }, false],
    ['non-JSON content type is ignored', { headers: { 'content-type': 'text/plain' }, response: tokenResponse({ access_token: 'A' }) }, false],
    ['no content type is ignored', { headers: {}, response: tokenResponse({ access_token: 'A' }) }, false],
    ['invalid JSON is ignored', { response: '{"access_token": "A"' }, false],
    ['empty access_token is ignored', { response: tokenResponse({ access_token: '' }) }, false],
    ['non-string access_token is ignored', { response: tokenResponse({ access_token: 42 }) }, false],
    ['body over the copy limit is ignored', { response: tokenResponse({ access_token: 'A', pad: 'x'.repeat(OBSERVED_BODY_LIMIT) }) }, false],
  ])('%s', async (_name, spec, stored) => {
    const store = createMemoryTokenStore();
    await exchange(store, 'token', spec);
    expect(await store.has('auth', 'A')).toBe(stored);
  });

  test.each<[string, Record<string, unknown>, number | undefined, number]>([
    ['expires_in seconds', { expires_in: 60 }, undefined, 60],
    ['expires_in as numeric string', { expires_in: '30' }, undefined, 30],
    ['default_ttl without expires_in', {}, 120, 120],
    ['expires_in wins over default_ttl', { expires_in: 10 }, 120, 10],
    ['non-positive expires_in falls back to default_ttl', { expires_in: 0 }, 90, 90],
    ['neither: the built-in default', {}, undefined, DEFAULT_TOKEN_TTL],
  ])('TTL: %s', async (_name, fields, defaultTtl, ttl) => {
    const c = clock();
    const store = createMemoryTokenStore({ now: c.now });
    await exchange(store, 'token', { response: tokenResponse({ access_token: 'A', ...fields }), defaultTtl });
    c.advance(ttl - 1);
    expect(await store.has('auth', 'A')).toBe(true);
    c.advance(1);
    expect(await store.has('auth', 'A')).toBe(false);
  });
});

describe('refresh and revoke', () => {
  test.each([
    ['form-urlencoded refresh grant', 'grant_type=refresh_token&refresh_token=R1'],
    ['JSON refresh grant', JSON.stringify({ grant_type: 'refresh_token', refresh_token: 'R1' })],
  ])('%s replaces the old access token', async (_name, refreshRequest) => {
    const store = createMemoryTokenStore();
    await exchange(store, 'token', {
      request: 'grant_type=client_credentials',
      response: tokenResponse({ access_token: 'A1', refresh_token: 'R1', expires_in: 60 }),
    });
    await exchange(store, 'token', {
      request: refreshRequest,
      response: tokenResponse({ access_token: 'A2', refresh_token: 'R2', expires_in: 60 }),
    });
    expect(await store.has('auth', 'A1')).toBe(false);
    expect(await store.has('auth', 'A2')).toBe(true);
    expect(await store.accessForRefresh('auth', 'R1')).toBeNull();
    expect(await store.accessForRefresh('auth', 'R2')).toBe('A2');
  });

  test('a refresh that re-issues the same access token keeps it', async () => {
    const store = createMemoryTokenStore();
    await exchange(store, 'token', { response: tokenResponse({ access_token: 'A1', refresh_token: 'R1' }) });
    await exchange(store, 'token', {
      request: 'grant_type=refresh_token&refresh_token=R1',
      response: tokenResponse({ access_token: 'A1', refresh_token: 'R1' }),
    });
    expect(await store.has('auth', 'A1')).toBe(true);
    expect(await store.accessForRefresh('auth', 'R1')).toBe('A1');
  });

  test('a failed refresh grant leaves the old token in place', async () => {
    const store = createMemoryTokenStore();
    await exchange(store, 'token', { response: tokenResponse({ access_token: 'A1', refresh_token: 'R1' }) });
    await exchange(store, 'token', {
      request: 'grant_type=refresh_token&refresh_token=R1',
      status: 400,
      response: JSON.stringify({ error: 'invalid_grant' }),
    });
    expect(await store.has('auth', 'A1')).toBe(true);
  });

  test.each<[string, string, number, boolean, boolean]>([
    ['revoking the access token removes it', 'token=A1', 200, false, true],
    ['revoking the refresh token removes its access token', 'token=R1&token_type_hint=refresh_token', 200, false, false],
    ['JSON revoke body', JSON.stringify({ token: 'A1' }), 200, false, true],
    ['a failed revoke removes nothing', 'token=A1', 401, true, true],
    ['revoking an unknown token removes nothing', 'token=other', 200, true, true],
  ])('%s', async (_name, request, status, accessLeft, linkLeft) => {
    const store = createMemoryTokenStore();
    await exchange(store, 'token', { response: tokenResponse({ access_token: 'A1', refresh_token: 'R1' }) });
    await exchange(store, 'revoke', { request, status, headers: {}, response: '' });
    expect(await store.has('auth', 'A1')).toBe(accessLeft);
    expect((await store.accessForRefresh('auth', 'R1')) !== null).toBe(linkLeft);
  });
});

describe('failures never escape finish()', () => {
  test('a store that rejects is logged, not thrown', async () => {
    const broken: TokenStore = {
      ...createMemoryTokenStore(),
      put: () => Promise.reject(new Error('redis down')),
    };
    const { logger, warnings } = silentLogger();
    await expect(exchange(broken, 'token', { response: tokenResponse({ access_token: 'A' }) }, logger)).resolves.toBeUndefined();
    expect(warnings).toEqual([expect.objectContaining({ server: 'auth', err: expect.objectContaining({ message: 'redis down' }) })]);
  });

  test('an unsupported content-encoding is logged, not thrown', async () => {
    const store = createMemoryTokenStore();
    const { logger, warnings } = silentLogger();
    await exchange(store, 'token', { headers: { ...JSON_TYPE, 'content-encoding': 'zstd' }, response: 'xx' }, logger);
    expect(warnings).toHaveLength(1);
    expect(await store.has('auth', 'xx')).toBe(false);
  });
});

describe('helpers', () => {
  test.each<[string, string, Record<string, string>]>([
    ['form', 'grant_type=refresh_token&refresh_token=a%2Bb', { grant_type: 'refresh_token', refresh_token: 'a+b' }],
    ['form, first value wins', 'token=a&token=b', { token: 'a' }],
    ['JSON object, strings only', '{"token":"a","n":1}', { token: 'a' }],
    ['JSON array yields nothing', '["token"]', {}],
    ['broken JSON yields nothing', '{"token":', {}],
    ['empty', '', {}],
  ])('parseParams: %s', (_name, body, expected) => {
    expect(Object.fromEntries(parseParams(Buffer.from(body)))).toEqual(expected);
  });

  test.each<[unknown, number | undefined]>([
    [60, 60],
    ['60', 60],
    [0, undefined],
    [-1, undefined],
    ['', undefined],
    ['abc', undefined],
    [null, undefined],
    [Infinity, undefined],
  ])('ttlOf(%p) = %p', (input, expected) => {
    expect(ttlOf(input)).toBe(expected);
  });
});
