import fc from 'fast-check';
import { SignJWT } from 'jose';
import { pino } from 'pino';
import { GatehouseError } from '#proto/errors';
import { compileJwtKeys } from '#proto/compile/jwt-keys';
import type { CompiledOAuthServer, CompiledRoute } from '#proto/compile/index';
import type { OAuthEndpointName, ProxyDefinition, TokenStrategy } from '#proto/definition/types';
import { createAuthorizer, parseAuthorization } from './index.js';
import { createMemoryTokenStore, createRedisTokenStore, type TokenStore } from './token-store.js';
import { freePort } from '../../../test/helpers/free-port.js';

const T = 1_700_000_000;
const SECRET = 'gatehouse-secret';
const logger = pino({ enabled: false });

const proxy = { methods: ['ALL'], upstreams: { balancing: 'roundrobin', targets: [{ target: 'http://127.0.0.1:1' }] } } as unknown as ProxyDefinition;

function oauthServer(name: string, strategy: TokenStrategy): CompiledOAuthServer {
  return {
    definition: { name, oauth_endpoints: { token: proxy }, token_strategy: strategy },
    routes: [],
    jwtKeys: strategy.name === 'jwt' && Array.isArray(strategy.settings) ? compileJwtKeys(strategy.settings, 'token_strategy.settings') : [],
  };
}

function apiRoute(serverName?: string): CompiledRoute {
  return {
    id: 'api:x',
    kind: 'api',
    name: 'x',
    hosts: [],
    methods: null,
    listenPath: null,
    headers: [],
    proxy,
    targets: [],
    conditionCount: 0,
    plugins: [],
    ...(serverName ? { oauth2: { serverName } } : {}),
  };
}

function endpointRoute(server: string, endpoint: OAuthEndpointName): CompiledRoute {
  return { ...apiRoute(), id: `oauth:${server}:${endpoint}`, kind: 'oauth-endpoint', name: server, endpoint };
}

const servers = new Map<string, CompiledOAuthServer>([
  ['jwt-auth', oauthServer('jwt-auth', { name: 'jwt', settings: [{ alg: 'HS256', key: SECRET }], leeway: 0 })],
  ['store-auth', oauthServer('store-auth', { name: 'storage', settings: { default_ttl: 60 }, leeway: 0 })],
]);

const sign = (key = SECRET) => new SignJWT({ sub: 'c', exp: T + 60 }).setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode(key));

/** A refusal may be thrown (known at once) or a rejection: both count. */
async function codeOf(check: () => unknown): Promise<string> {
  try {
    await check();
    return 'ok';
  } catch (err) {
    if (err instanceof GatehouseError) return err.code;
    throw err;
  }
}

function parseCode(value: string | undefined): string {
  try {
    parseAuthorization(value);
    return 'ok';
  } catch (err) {
    return (err as GatehouseError).code;
  }
}

describe('Authorization header parsing', () => {
  test.each<[string, string | undefined, string]>([
    ['absent', undefined, 'AUTH_HEADER_MISSING'],
    ['empty', '', 'AUTH_HEADER_MISSING'],
    ['one word that is not Bearer', 'token123', 'AUTH_HEADER_MISSING'],
    ['three parts', 'Bearer a b', 'AUTH_HEADER_MISSING'],
    ['tab instead of space', 'Bearer\tabc', 'AUTH_HEADER_MISSING'],
    ['Basic scheme', 'Basic dXNlcjpwYXNz', 'BEARER_MALFORMED'],
    ['Token scheme', 'Token abc', 'BEARER_MALFORMED'],
    ['Bearer prefix glued on', 'Bearerabc def', 'BEARER_MALFORMED'],
    ['lone Bearer: no token is a 400 like Janus', 'Bearer', 'AUTH_HEADER_MISSING'],
    ['Bearer with trailing spaces: no token', 'Bearer   ', 'AUTH_HEADER_MISSING'],
    ['lone lower-case bearer', 'bearer', 'AUTH_HEADER_MISSING'],
    ['Bearer token', 'Bearer abc', 'ok'],
    ['lower-case scheme', 'bearer abc', 'ok'],
    ['upper-case scheme', 'BEARER abc', 'ok'],
    ['several spaces', 'Bearer    abc', 'ok'],
  ])('%s', (_name, value, expected) => {
    expect(parseCode(value)).toBe(expected);
  });

  test('the token is returned as sent', () => {
    expect(parseAuthorization('bearer  a.b-c_d~')).toBe('a.b-c_d~');
    expect(parseAuthorization('Bearer a.b-c_d~')).toBe('a.b-c_d~');
  });

  test('the one-space fast path accepts and refuses exactly what the general parse does (generated headers)', () => {
    /** The parse before the fast path was added: the reference. */
    const general = (value: string | undefined): string => {
      const m = value === undefined ? null : /^(\S+) +(\S+)$/.exec(value.trim());
      if (!m) return 'AUTH_HEADER_MISSING';
      return m[1].toLowerCase() === 'bearer' ? `token ${m[2]}` : 'BEARER_MALFORMED';
    };
    const outcome = (value: string | undefined): string => {
      try {
        return `token ${parseAuthorization(value)}`;
      } catch (err) {
        return (err as GatehouseError).code;
      }
    };
    // Scheme spellings and the characters that decide a parse: ASCII and non-ASCII whitespace, case-folding traps (İ, K).
    const scheme = fc.constantFrom('Bearer', 'bearer', 'BEARER', 'bEaReR', 'Bearerx', 'Beare', 'Basic', 'Bearer\u0130', 'Be\u212Arer', '');
    const piece = fc.constantFrom(' ', '  ', '\t', '\u00a0', '\ufeff', '\u2028', '\u3000', '\v', 'a', 'Z', '.', '-', '\u0130', '~');
    const header = fc
      .tuple(fc.array(piece, { maxLength: 3 }), scheme, fc.array(piece, { maxLength: 12 }))
      .map(([lead, s, rest]) => lead.join('') + s + rest.join(''));
    fc.assert(
      fc.property(header, (value) => {
        expect(outcome(value)).toBe(general(value));
      }),
      { seed: 20261124, numRuns: 20_000 },
    );
  });
});

describe('check()', () => {
  const store = createMemoryTokenStore();
  const authorizer = createAuthorizer({ servers, tokenStore: store, now: () => T, logger });

  beforeAll(async () => {
    await store.put('store-auth', 'opaque-ok', 60);
  });

  test.each<[string, CompiledRoute, () => Promise<string | undefined> | string | undefined, string]>([
    ['route without oauth2 passes without a header', apiRoute(), () => undefined, 'ok'],
    ['oauth endpoint routes are never checked', endpointRoute('jwt-auth', 'token'), () => undefined, 'ok'],
    ['jwt: no header', apiRoute('jwt-auth'), () => undefined, 'AUTH_HEADER_MISSING'],
    ['jwt: Basic scheme', apiRoute('jwt-auth'), () => 'Basic abc', 'BEARER_MALFORMED'],
    ['jwt: valid token', apiRoute('jwt-auth'), async () => `Bearer ${await sign()}`, 'ok'],
    ['jwt: lower-case bearer', apiRoute('jwt-auth'), async () => `bearer ${await sign()}`, 'ok'],
    ['jwt: wrong secret', apiRoute('jwt-auth'), async () => `Bearer ${await sign('wrong')}`, 'TOKEN_REJECTED'],
    ['jwt: garbage', apiRoute('jwt-auth'), () => 'Bearer garbage', 'TOKEN_REJECTED'],
    ['storage: known token', apiRoute('store-auth'), () => 'Bearer opaque-ok', 'ok'],
    ['storage: unknown token', apiRoute('store-auth'), () => 'Bearer opaque-unknown', 'TOKEN_REJECTED'],
    ['storage: a JWT is just an unknown token', apiRoute('store-auth'), async () => `Bearer ${await sign()}`, 'TOKEN_REJECTED'],
    ['server missing from the snapshot fails closed', apiRoute('gone'), async () => `Bearer ${await sign()}`, 'TOKEN_REJECTED'],
    ['server missing, no header: header error first', apiRoute('gone'), () => undefined, 'AUTH_HEADER_MISSING'],
  ])('%s', async (_name, route, header, expected) => {
    const value = await header();
    expect(await codeOf(() => authorizer.check(route, value))).toBe(expected);
  });

  test('answered synchronously when known at once: no oauth2, a cached jwt, a bad header; a promise only to wait', async () => {
    const token = await new SignJWT({ sub: 'sync-path', exp: T + 60 }).setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode(SECRET));
    expect(authorizer.check(apiRoute(), undefined)).toBeUndefined();
    const first = authorizer.check(apiRoute('jwt-auth'), `Bearer ${token}`);
    expect(first).toBeInstanceOf(Promise);
    const grant = await first;
    expect(authorizer.check(apiRoute('jwt-auth'), `Bearer ${token}`)).toBe(grant);
    expect(() => authorizer.check(apiRoute('jwt-auth'), 'Basic abc')).toThrow(expect.objectContaining({ code: 'BEARER_MALFORMED' }));
    const stored = authorizer.check(apiRoute('store-auth'), 'Bearer opaque-ok');
    expect(stored).toBeInstanceOf(Promise);
    await stored;
  });

  test('errors carry the gateway status', async () => {
    const err = await (async () => authorizer.check(apiRoute('jwt-auth'), 'Bearer nope'))().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatehouseError);
    expect((err as GatehouseError).status).toBe(401);
  });
});

describe('storage strategy when the store fails', () => {
  test('a store that rejects → TOKEN_REJECTED, logged', async () => {
    const warnings: unknown[] = [];
    const failing: TokenStore = { ...createMemoryTokenStore(), has: () => Promise.reject(new Error('boom')) };
    const authorizer = createAuthorizer({
      servers,
      tokenStore: failing,
      logger: { info: () => undefined, debug: () => undefined, warn: (o: unknown) => void warnings.push(o) } as never,
    });
    expect(await codeOf(() => authorizer.check(apiRoute('store-auth'), 'Bearer x'))).toBe('TOKEN_REJECTED');
    expect(warnings).toEqual([expect.objectContaining({ server: 'store-auth', err: expect.objectContaining({ message: 'boom' }) })]);
  });

  test('unreachable Redis → TOKEN_REJECTED without hanging', async () => {
    const store = createRedisTokenStore({ url: `redis://127.0.0.1:${await freePort()}`, logger });
    try {
      const authorizer = createAuthorizer({ servers, tokenStore: store, logger });
      const started = Date.now();
      expect(await codeOf(() => authorizer.check(apiRoute('store-auth'), 'Bearer x'))).toBe('TOKEN_REJECTED');
      expect(Date.now() - started).toBeLessThan(5_000); // fails closed instead of hanging (commands time out after 1 s)
    } finally {
      await store.close();
    }
  });
});

describe('observe()', () => {
  const authorizer = createAuthorizer({ servers, tokenStore: createMemoryTokenStore(), logger });
  test.each<[string, CompiledRoute, boolean]>([
    ['storage token endpoint', endpointRoute('store-auth', 'token'), true],
    ['storage revoke endpoint', endpointRoute('store-auth', 'revoke'), true],
    ['storage authorize endpoint', endpointRoute('store-auth', 'authorize'), false],
    ['storage introspect endpoint', endpointRoute('store-auth', 'introspect'), false],
    ['jwt token endpoint', endpointRoute('jwt-auth', 'token'), false],
    ['unknown server', endpointRoute('gone', 'token'), false],
    ['api route', apiRoute('store-auth'), false],
  ])('%s', (_name, route, observed) => {
    expect(authorizer.observe(route) !== null).toBe(observed);
  });

  test('an observed token response makes the token valid for check()', async () => {
    const tokenStore = createMemoryTokenStore();
    const a = createAuthorizer({ servers, tokenStore, logger });
    const observer = a.observe(endpointRoute('store-auth', 'token'))!;
    observer.requestChunk(Buffer.from('grant_type=client_credentials'));
    observer.response(200, { 'content-type': 'application/json' });
    observer.responseChunk(Buffer.from(JSON.stringify({ access_token: 'fresh', token_type: 'Bearer', expires_in: 30 })));
    await observer.finish();
    expect(await codeOf(() => a.check(apiRoute('store-auth'), 'Bearer fresh'))).toBe('ok');
  });
});
