import { SignJWT, type JWTPayload } from 'jose';
import type { GatehouseError } from '#proto/errors';
import { compileApi, compileOAuthServer } from '#proto/compile/index';
import { parseApiDefinition, parseOAuthServer } from '#proto/definition/index';
import type { CompiledOAuth2 } from '#proto/plugins/index';
import { createAuthorizer, createMemoryTokenStore } from '../auth/index.js';
import { oauth2Runtime } from './oauth2.js';
import type { PluginExchange } from './pipeline.js';
import type { StageDeps } from './runtime.js';

const SECRET = 'oauth2-runtime-secret';
const server = compileOAuthServer(
  parseOAuthServer({
    name: 'idp',
    oauth_endpoints: { token: { listen_path: '/idp/token', upstreams: { targets: [{ target: 'http://idp' }] } } },
    token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: SECRET }] },
  }),
);
const authorizer = createAuthorizer({ servers: new Map([['idp', server]]), tokenStore: createMemoryTokenStore() });
const sign = (claims: JWTPayload) =>
  new SignJWT({ exp: Math.floor(Date.now() / 1000) + 60, ...claims }).setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode(SECRET));

function stage(config: object) {
  const route = compileApi(
    parseApiDefinition({
      name: 'orders',
      proxy: { listen_path: '/o/*', upstreams: { targets: [{ target: 'http://u' }] } },
      plugins: [{ name: 'oauth2', config: { server_name: 'idp', ...config } }],
    }),
  );
  return oauth2Runtime.stage(route.plugins[0].config as CompiledOAuth2, { route, authorizer } as unknown as StageDeps);
}

/** Runs the request hook on these raw headers: the headers that go upstream, or the refusal and its challenge. */
async function run(config: object, headers: string[]) {
  const clientHeaders: Record<string, string> = {};
  const authorization = headers.find((_, i) => i % 2 === 1 && headers[i - 1].toLowerCase() === 'authorization');
  const ex = { headers, req: { headers: { authorization } }, addClientHeader: (n: string, v: string) => (clientHeaders[n] = v) } as unknown as PluginExchange;
  try {
    await stage(config).request!(ex);
  } catch (err) {
    return { refused: (err as GatehouseError).code, challenge: clientHeaders['www-authenticate'] };
  }
  return { headers: ex.headers };
}

test('claim headers replace every client copy, whatever its case; other headers keep their order', async () => {
  const token = await sign({ sub: 'u-1', tenant: 7 });
  const result = await run({ claims_to_headers: { sub: 'X-User-Id', tenant: 'X-Tenant' } }, [
    'x-user-id',
    'forged-1',
    'Authorization',
    `Bearer ${token}`,
    'X-USER-ID',
    'forged-2',
    'X-Tenant',
    'forged',
    'Accept',
    '*/*',
  ]);
  expect(result).toEqual({ headers: ['Authorization', `Bearer ${token}`, 'Accept', '*/*', 'x-user-id', 'u-1', 'x-tenant', '7'] });
});

test('without claims_to_headers the client headers are left as they are (same list)', async () => {
  const headers = ['authorization', `Bearer ${await sign({ sub: 'u' })}`, 'X-User-Id', 'kept'];
  expect(await run({}, headers)).toEqual({ headers });
});

test('every required scope must be there; the challenge names them all', async () => {
  const config = { scopes: ['orders:read', 'orders:write'] };
  expect(await run(config, ['authorization', `Bearer ${await sign({ scope: 'orders:read orders:write' })}`])).toHaveProperty('headers');
  expect(await run(config, ['authorization', `Bearer ${await sign({ scope: 'orders:read' })}`])).toEqual({
    refused: 'INSUFFICIENT_SCOPE',
    challenge: 'Bearer realm="orders", error="insufficient_scope", scope="orders:read orders:write"',
  });
});

test.each([
  ['no Authorization', [], 'AUTH_HEADER_MISSING', 'Bearer realm="orders"'],
  ['another scheme', ['authorization', 'Basic dTpw'], 'BEARER_MALFORMED', 'Bearer realm="orders"'],
  ['not `Bearer <token>`', ['authorization', 'Bearer a b'], 'AUTH_HEADER_MISSING', 'Bearer realm="orders", error="invalid_request"'],
  ['a bad token', ['authorization', 'Bearer not-a-jwt'], 'TOKEN_REJECTED', 'Bearer realm="orders", error="invalid_token"'],
])('%s → %s with its RFC 6750 challenge', async (_row, headers, refused, challenge) => {
  expect(await run({}, headers)).toEqual({ refused, challenge });
});
