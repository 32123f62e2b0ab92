import { parseApiDefinition } from '#proto/definition/index';
import type { GatehouseError } from '#proto/errors';
import { compilePlugins, type CompiledOpenidConnect } from '#proto/plugins/index';
import type { OidcProviders, ProviderEndpoints } from '../auth/oidc-provider.js';
import { seal } from '../auth/sealed-cookie.js';
import { openidConnectRuntime } from './openid-connect.js';
import type { PluginAnswer, PluginExchange } from './pipeline.js';
import type { StageDeps } from './runtime.js';
import { parseTrustedProxies } from './client-ip.js';

const ENDPOINTS = {
  authorization: 'https://idp.test/authorize?tenant=1',
  token: new URL('https://idp.test/token'),
  endSession: undefined,
} as unknown as ProviderEndpoints;
const oidc = { endpoints: () => ENDPOINTS } as unknown as OidcProviders;

function compiled(extra: Record<string, unknown> = {}): CompiledOpenidConnect {
  const config = { issuer: 'https://idp.test', client_id: 'app', client_secret: 's', cookie_secret: 'k'.repeat(32), ...extra };
  const def = parseApiDefinition({
    name: 'app',
    proxy: { listen_path: '/app/*', upstreams: { targets: [{ target: 'http://u' }] } },
    plugins: [{ name: 'openid_connect', config }],
  });
  return compilePlugins(def.plugins)[0]!.config as CompiledOpenidConnect;
}

/** Runs the request hook on a request to `path` with these raw headers over a TLS listener or not. */
function run(c: CompiledOpenidConnect, path: string, rawHeaders: string[], tls = false, peer = '127.0.0.1', trustedProxies = '') {
  const headers: Record<string, string> = {};
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    headers[name] = headers[name] === undefined ? rawHeaders[i + 1]! : `${headers[name]}${name === 'cookie' ? '; ' : ', '}${rawHeaders[i + 1]}`;
  }
  const ex = {
    req: { method: 'GET', headers: { host: 'app.example.com', ...headers }, socket: { encrypted: tls, remoteAddress: peer } },
    headers: rawHeaders,
    path,
    query: '',
    matched: '/app',
  } as unknown as PluginExchange;
  try {
    const answer = openidConnectRuntime.stage(c, { oidc, trustedProxies: parseTrustedProxies(trustedProxies) } as unknown as StageDeps).request!(ex) as
      | PluginAnswer
      | undefined;
    return { answer, upstream: ex.headers };
  } catch (err) {
    return { refused: (err as GatehouseError).code };
  }
}

const now = () => Math.floor(Date.now() / 1000);

test("over TLS the sign-in redirect asks for an https redirect_uri, keeps the endpoint's own query, and the flow cookie is Secure", () => {
  const { answer } = run(compiled(), '/app/x', ['Accept', 'text/html'], true);
  const location = new URL(String(answer!.headers!.location));
  expect(location.searchParams.get('tenant')).toBe('1');
  expect(location.searchParams.get('redirect_uri')).toBe('https://app.example.com/app/callback');
  expect(String(answer!.headers!['set-cookie'])).toMatch(/^gatehouse_oidc_flow=[\w-]+; Path=\/; Max-Age=600; HttpOnly; SameSite=Lax; Secure$/);
  expect(String(run(compiled(), '/app/x', ['Accept', 'text/html']).answer!.headers!['set-cookie'])).not.toContain('Secure');
});

test('behind a trusted proxy that terminated TLS (X-Forwarded-Proto: https) the redirect_uri is https and the flow cookie Secure; from anyone else the header is ignored', () => {
  const behind = (peer: string) => run(compiled(), '/app/x', ['Accept', 'text/html', 'X-Forwarded-Proto', 'https'], false, peer, '10.0.0.0/8').answer!;
  const trusted = behind('10.0.0.1');
  expect(new URL(String(trusted.headers!.location)).searchParams.get('redirect_uri')).toBe('https://app.example.com/app/callback');
  expect(String(trusted.headers!['set-cookie'])).toMatch(/; Secure$/);
  const direct = behind('198.51.100.1');
  expect(new URL(String(direct.headers!.location)).searchParams.get('redirect_uri')).toBe('http://app.example.com/app/callback');
  expect(String(direct.headers!['set-cookie'])).not.toContain('Secure');
});

test('a session passes: every client copy of the user and claim headers is replaced, our cookies leave every Cookie line, the others stay', () => {
  const c = compiled({ claims_to_headers: { email: 'X-Email' } });
  const session = seal(c.cookieKey, c.cookieName, { sub: 'ada', c: { email: 'ada@example.com' }, exp: now() + 60 });
  const { upstream } = run(c, '/app/x', [
    'Cookie',
    'a=1',
    'X-AUTHENTICATED-USER',
    'admin',
    'cookie',
    `gatehouse_oidc=${session}; b=2`,
    'x-email',
    'root@x',
    'Accept',
    '*/*',
  ]);
  expect(upstream).toEqual(['Accept', '*/*', 'cookie', 'a=1; b=2', 'x-authenticated-user', 'ada', 'x-email', 'ada@example.com']);
});

test('a session past its exp, or sealed under another cookie_secret, is no session', () => {
  const c = compiled();
  const expired = seal(c.cookieKey, c.cookieName, { sub: 'ada', exp: now() - 1 });
  const foreign = seal(compiled({ cookie_secret: 'z'.repeat(32) }).cookieKey, c.cookieName, { sub: 'ada', exp: now() + 60 });
  for (const value of [expired, foreign]) expect(run(c, '/app/x', ['Cookie', `gatehouse_oidc=${value}`])).toEqual({ refused: 'SIGN_IN_REQUIRED' });
});

test('a Host that is not a host gets no redirect', () => {
  const ex = run(compiled(), '/app/x', ['Accept', 'text/html', 'Host', 'evil.example/x']);
  expect(ex).toEqual({ refused: 'BAD_REQUEST_HOST' });
});
