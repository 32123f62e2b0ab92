/**
 * `gatehouse import --from-janus` as a real process against a real control plane, data plane and
 * upstreams. Fixtures (test/fixtures/janus/) are written in Janus's formats: a file store (a single
 * definition file, a file with an array, an OAuth server under auth/), mongoexport files (an array and
 * one document per line, with `$oid`), and a Janus admin API of this test's own with Janus's login.
 * Each default that differs is shown to behave, once imported, as Janus's code makes it behave.
 */
import { execFile } from 'node:child_process';
import { cp as copy, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listen } from '#proto/listen';
import { createAdminClient, type AdminClient } from '../helpers/admin-client.js';
import { startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';
import { startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

const FIXTURES = 'test/fixtures/janus';
const EXIT_CHANGES = 3;
const EXIT_ACTION_NEEDED = 4;

let cp: ControlPlane;
let dp: DataPlane;
let upstream: Upstream;
let upstreamB: Upstream;
let admin: AdminClient;
let work: string;
let configHome: string;

function cli(args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  const fullEnv: Record<string, string> = { PATH: process.env.PATH ?? '', XDG_CONFIG_HOME: configHome, GATEHOUSE_URL: cp.adminUrl, ...env };
  return new Promise((resolve) => {
    execFile(process.execPath, ['cli/dist/main.js', ...args], { env: fullEnv, timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** The fixture tree copied into the work directory with the upstreams' addresses filled in. */
async function fixture(name: string): Promise<string> {
  const dest = join(work, name);
  await copy(join(FIXTURES, name), dest, { recursive: true });
  const files = (await readdir(dest, { recursive: true, withFileTypes: true })).filter((e) => e.isFile());
  for (const f of files) {
    const path = join(f.parentPath, f.name);
    const text = await readFile(path, 'utf8');
    await writeFile(path, text.replaceAll('http://UPSTREAM_B', upstreamB.url).replaceAll('http://UPSTREAM', upstream.url));
  }
  return dest;
}

interface Item {
  kind: string;
  name: string;
  status: string;
  changes: string[];
  differences: string[];
  reason?: string;
  definition?: any;
}

const byName = (items: Item[]) => Object.fromEntries(items.map((i) => [`${i.kind}/${i.name}`, i]));

async function currentVersion(): Promise<number> {
  return (await admin.request('GET', '/config')).snapshotVersion!;
}

async function historyLength(): Promise<number> {
  return (await admin.request('GET', '/config/history')).body.length;
}

beforeAll(async () => {
  upstream = await startUpstream('janus-upstream');
  upstreamB = await startUpstream('janus-upstream-b');
  upstream.setBehaviour((req) => {
    if (req.url.startsWith('/slow')) return { kind: 'delay', ms: 3000 };
    if (req.url.startsWith('/failing')) return { kind: 'fixed', status: 500 };
    return { kind: 'fixed' };
  });
  // The setting that lets a migration keep Janus's short HS keys (ignored by control planes without the rule).
  cp = await startControlPlane({ name: 'cp-janus', env: { ALLOW_SHORT_HMAC_KEYS: 'true' } });
  dp = await startDataPlane({ controlPlaneAddr: cp.grpcAddr, id: 'dp-janus' });
  admin = await createAdminClient(cp);
  work = await mkdtemp(join(tmpdir(), 'gatehouse-janus-'));
  configHome = join(work, 'config');
  const login = await cli(['login', '--password', cp.password]);
  if (login.code !== 0) throw new Error(login.stderr);
}, 60_000);

afterAll(async () => {
  await dp?.stop();
  await cp?.dispose();
  await upstream?.close();
  await upstreamB?.close();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('a Janus file store', () => {
  let store: string;
  /** The version before the import, and what --apply printed and did. */
  let before: number;
  let refused: CliRun;
  let applied: CliRun;
  let versionAfterRefused: number;
  let versionAfterApply: number;
  let historyAdded: number;

  // Tests run in a random order: the import is done once here, each test reads its outcome.
  beforeAll(async () => {
    store = await fixture('store');
    before = await currentVersion();
    const historyBefore = await historyLength();
    refused = await cli(['import', '--from-janus', store, '--apply']);
    versionAfterRefused = await currentVersion();
    applied = await cli(['import', '--from-janus', store, '--apply', '--skip-refused']);
    versionAfterApply = await currentVersion();
    historyAdded = (await historyLength()) - historyBefore;
    await admin.waitForDataPlanes(versionAfterApply, [dp]);
  }, 60_000);

  test('dry run: one line per definition and OAuth server, exit 4 for refused items, nothing written', async () => {
    const version = await currentVersion();
    const run = await cli(['import', '--from-janus', store]);
    expect(run.code).toBe(EXIT_ACTION_NEEDED);
    const lines = run.stdout.split('\n');
    expect(lines[0]).toMatch(/^KIND\s+NAME\s+STATUS\s+DETAILS$/);
    // 13 definitions in the array file, 1 in the single file, 1 OAuth server.
    expect(lines.filter((l) => /^(api|oauth_server)\s/.test(l))).toHaveLength(15);
    expect(run.stdout).toMatch(/api\s+janus-plain\s+unchanged/);
    expect(run.stdout).toMatch(/api\s+janus-methods\s+changed\s+methods: \["GET"\]/);
    expect(run.stdout).toMatch(/api\s+janus-root-prefix\s+refused\s+rewrite: Janus forwards every request of \/root-prefix\/\* to \//);
    expect(run.stdout).toMatch(
      /oauth_server\s+local\s+refused\s+HS256 key is 6 bytes: rotate it, or set ALLOW_SHORT_HMAC_KEYS=true on the control plane during the migration/,
    );
    expect(run.stdout).toContain('dry run: nothing written; the control plane');
    expect(await currentVersion()).toBe(version);
  });

  test('every difference is in the JSON report with its reason', async () => {
    const run = await cli(['-o', 'json', 'import', '--from-janus', store]);
    expect(run.code).toBe(EXIT_ACTION_NEEDED);
    const items = byName(JSON.parse(run.stdout).items);
    expect(items['api/janus-rate'].differences).toContain('rate_limit: a JSON 429 with Retry-After instead of Janus\'s plain-text "Limit exceeded"');
    expect(items['api/janus-strip'].differences.join()).toContain('trailing slash: Janus forwards /strip/ to /base, Gatehouse to /base/');
    expect(items['api/janus-methods'].definition.proxy.forwarding_timeouts.response_header_timeout).toBe('60s');
    expect(items['api/janus-methods'].differences.join()).toContain('Janus waits for response headers without limit');
    expect(items['api/janus-plain'].definition.proxy.forwarding_timeouts).toEqual({ dial_timeout: '10s', response_header_timeout: '30s' });
    expect(items['api/janus-plain'].definition.health_check).toBeUndefined();
  });

  test('--apply with a refused item writes nothing; --skip-refused writes the rest as one version', async () => {
    expect(refused.code).toBe(EXIT_ACTION_NEEDED);
    expect(refused.stderr).toContain('error: nothing written: 1 item(s) refused (api janus-root-prefix)');
    expect(versionAfterRefused).toBe(before);

    expect(applied.code).toBe(EXIT_ACTION_NEEDED);
    expect(applied.stdout).toContain(
      `imported: now version ${before + 1} (apis: 13 added, 0 changed; oauth_servers: 1 added, 0 changed); \`gatehouse rollback ${before}\` undoes it`,
    );
    expect(versionAfterApply).toBe(before + 1);
    expect(historyAdded).toBe(1);
    expect((await admin.getApi('janus-root-prefix')).status).toBe(404);
  });

  test('importing the same store again changes nothing', async () => {
    const version = await currentVersion();
    const run = await cli(['import', '--from-janus', store, '--apply', '--skip-refused']);
    expect(run.stdout).toContain(`nothing to change (version ${version})`);
    expect(await currentVersion()).toBe(version);
  });

  test('no methods: GET only, as Janus (POST is answered as an unmatched request)', async () => {
    const get = await dp.request('GET', '/methods/x');
    expect(get.status).toBe(200);
    expect(upstream.last()?.url).toBe('/m/methods/x');
    const unmatched = await dp.request('POST', '/nowhere');
    const post = await dp.request('POST', '/methods/x');
    expect(post.status).toBe(404);
    expect(post.json).toEqual(unmatched.json);
  });

  test('empty methods and a missing balancing: Janus registers no route, so the API is imported inactive', async () => {
    for (const [name, path] of [
      ['janus-no-methods', '/no-methods/x'],
      ['janus-no-balancing', '/no-balancing/x'],
    ]) {
      expect((await admin.getApi(name)).body.active).toBe(false);
      expect((await dp.request('GET', path)).status).toBe(404);
    }
  });

  test('weight balancing: a target of weight 0 is never elected, as in Janus', async () => {
    upstreamB.reset();
    for (let i = 0; i < 10; i++) expect((await dp.request('GET', '/weights/x')).status).toBe(200);
    expect(upstreamB.requests).toHaveLength(0);
  });

  test("rewrite: a target without a path on an exact listen_path reaches the upstream at Janus's path /", async () => {
    expect((await dp.request('GET', '/root-exact')).status).toBe(200);
    expect(upstream.last()?.url).toBe('/');
    expect((await admin.getApi('janus-root-exact')).body.proxy.strip_path).toBe(true);
  });

  test('strip_path: the upstream path Janus uses', async () => {
    expect((await dp.request('GET', '/strip/a/b?q=1')).status).toBe(200);
    expect(upstream.last()?.url).toBe('/base/a/b?q=1');
  });

  test('cors: credentials allowed for the listed origin, as Janus always allows them', async () => {
    const res = await dp.request('GET', '/cors/x', { headers: { origin: 'https://app.example.com' } });
    expect(res.status).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBe('https://app.example.com');
    expect(res.headers['access-control-allow-credentials']).toBe('true');
  });

  test("cb: hystrix's 1 s timeout cuts a slow upstream, as in Janus", async () => {
    const started = Date.now();
    const res = await dp.request('GET', '/cb/x', { timeoutMs: 10_000 });
    // The upstream answers after 3 s; the breaker's timeout answers first.
    expect(res.status).toBeGreaterThanOrEqual(500);
    expect(Date.now() - started).toBeLessThan(3000);
    expect((await admin.getApi('janus-cb')).body.plugins[0].config).toMatchObject({ timeout: 1000, max_concurrent_requests: 10 });
  });

  test("cb: hystrix's 10 concurrent requests: the 11th is refused, as in Janus", async () => {
    const slow = () => upstream.requests.filter((r) => r.url.startsWith('/slow')).length;
    const before = slow();
    const answers = await Promise.all(Array.from({ length: 11 }, () => dp.request('GET', '/cb/x', { timeoutMs: 10_000 })));
    expect(answers.filter((a) => a.status === 503 && a.json === 'upstream circuit open')).toHaveLength(1);
    expect(slow() - before).toBe(10);
  });

  test('retry: a POST is retried, as Janus retries every method', async () => {
    const before = upstream.requests.filter((r) => r.url.startsWith('/failing')).length;
    expect((await dp.request('POST', '/retry/x')).status).toBe(500);
    expect(upstream.requests.filter((r) => r.url.startsWith('/failing') && r.method === 'POST').length - before).toBe(2);
  });

  test('response_transformer: no effect, as in Janus (imported disabled)', async () => {
    const res = await dp.request('GET', '/response-transformer/x');
    expect(res.status).toBe(200);
    expect(res.headers['x-added']).toBeUndefined();
    expect((await admin.getApi('janus-response-transformer')).body.plugins[0].enabled).toBe(false);
  });

  test('a plugin without enabled is off, and an unknown one ignored, as in Janus', async () => {
    for (let i = 0; i < 3; i++) expect((await dp.request('GET', '/plugin-off/x')).status).toBe(200);
    const plugins = (await admin.getApi('janus-plugin-off')).body.plugins;
    expect(plugins.map((p: any) => [p.name, p.enabled])).toEqual([
      ['rate_limit', false],
      ['body_limit', true],
    ]);
  });

  test('rate_limit: the limit is kept (its 429 is JSON, a reported difference)', async () => {
    expect((await dp.request('GET', '/rate/x')).status).toBe(200);
    const limited = await dp.request('GET', '/rate/x');
    expect(limited.status).toBe(429);
    expect(limited.headers['content-type']).toContain('application/json');
  });

  test('the OAuth server with a short HS256 key is submitted, and its token endpoint reaches the upstream at /token', async () => {
    expect((await admin.getOAuthServer('local')).status).toBe(200);
    expect((await dp.request('POST', '/auth/token')).status).toBe(200);
    expect(upstream.last()?.url).toBe('/token');
  });
});

test('a definition the control plane refuses: the error names it, and --apply writes nothing', async () => {
  const dir = join(work, 'refused-store');
  await mkdir(join(dir, 'apis'), { recursive: true });
  const bad = {
    name: 'janus-bad-limit',
    proxy: { listen_path: '/bad-limit/*', methods: ['GET'], upstreams: { balancing: 'roundrobin', targets: [{ target: `${upstream.url}/x` }] } },
    plugins: [{ name: 'rate_limit', enabled: true, config: { limit: 'lots', policy: 'local' } }],
  };
  await writeFile(join(dir, 'apis', 'bad.json'), JSON.stringify(bad));
  const before = await currentVersion();
  for (const args of [[], ['--apply']]) {
    const run = await cli(['import', '--from-janus', dir, ...args]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^error: the control plane refused the import, nothing written: janus-bad-limit: apis\[\d+\]\.plugins\[0\]\.config\.limit /);
  }
  expect(await currentVersion()).toBe(before);
  expect((await admin.getApi('janus-bad-limit')).status).toBe(404);
});

describe('a mongoexport', () => {
  test('an array file and line-delimited files with $oid: dry run, then --apply as one version', async () => {
    const dir = await fixture('mongo');
    const files = ['api_specs.json', 'oauth_servers.json', 'basic_auth.json'].map((f) => join(dir, f));
    const dry = await cli(['-o', 'json', 'import', '--from-janus', ...files]);
    expect(dry.code).toBe(EXIT_ACTION_NEEDED);
    const items = byName(JSON.parse(dry.stdout).items);
    expect(Object.keys(items)).toEqual([
      'api/mongo-users',
      'api/mongo-orders',
      'oauth_server/mongo-auth',
      'basic_auth_user/janus-bcrypt',
      'basic_auth_user/scrypt-user',
    ]);
    expect(items['api/mongo-users'].definition._id).toBeUndefined();
    expect(items['oauth_server/mongo-auth']).toMatchObject({ status: 'changed', definition: { token_strategy: { leeway: 30 } } });
    expect(items['oauth_server/mongo-auth'].reason).toBeUndefined();
    expect(items['basic_auth_user/janus-bcrypt'].status).toBe('reset');
    expect(items['basic_auth_user/janus-bcrypt'].reason).toContain('bcrypt, which Gatehouse cannot verify');
    expect(items['basic_auth_user/scrypt-user'].status).toBe('unchanged');

    const before = await currentVersion();
    const applied = await cli(['import', '--from-janus', ...files, '--apply']);
    expect(applied.code).toBe(EXIT_ACTION_NEEDED);
    expect(await currentVersion()).toBe(before + 1);
    await admin.waitForDataPlanes(before + 1, [dp]);

    // The carried-over hash is verified by basic_auth; the bcrypt user was not imported.
    const basic = (user: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` });
    expect((await dp.request('GET', '/mongo/users/a', { headers: basic('scrypt-user', 'carried-over-password') })).status).toBe(200);
    expect(upstream.last()?.url).toBe('/users/a');
    expect((await dp.request('GET', '/mongo/users/a', { headers: basic('janus-bcrypt', 'whatever-it-was') })).status).toBe(401);
    expect((await dp.request('POST', '/mongo/orders/a')).status).toBe(404);

    // One rollback undoes the whole import.
    expect((await cli(['rollback', String(before)])).code).toBe(0);
    expect((await admin.getApi('mongo-users')).status).toBe(404);
    expect((await admin.request('GET', '/config')).body.basic_auth_credentials.map((c: any) => c.username)).not.toContain('scrypt-user');
  });
});

describe("a running Janus's admin API", () => {
  let janus: Server;
  let janusUrl: string;
  const logins: unknown[] = [];
  const token = 'janus-admin-token';
  // As Janus serves them: after its defaults, with Go's zero values.
  const apis = () => [
    {
      name: 'live-api',
      active: true,
      proxy: {
        preserve_host: false,
        listen_path: '/live/*',
        upstreams: { balancing: 'roundrobin', targets: [{ target: `${upstream.url}/live`, weight: 0 }] },
        insecure_skip_verify: false,
        strip_path: true,
        append_path: false,
        methods: ['GET'],
        hosts: [],
        forwarding_timeouts: { dial_timeout: '0s', response_header_timeout: '0s' },
      },
      plugins: [{ name: 'cors', enabled: true, config: { domains: ['*'] } }],
      health_check: { url: '', timeout: 0 },
    },
  ];

  beforeAll(async () => {
    janus = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const send = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
        if (req.method === 'POST' && req.url === '/login') {
          const body = JSON.parse(Buffer.concat(chunks).toString() || 'null');
          logins.push(body);
          if (body?.username !== 'janus-admin' || body?.password !== 'janus-password') return send(401, 'incorrect username or password');
          return send(200, { token_type: 'Bearer', access_token: token, expires_in: Math.floor(Date.now() / 1000) + 3600 });
        }
        if (req.headers.authorization !== `Bearer ${token}`) return send(401, 'authorization header is not a bearer token');
        if (req.method === 'GET' && req.url === '/apis') return send(200, apis());
        if (req.method === 'GET' && req.url === '/oauth/servers') return send(200, []);
        return send(404, 'not found');
      });
    });
    janusUrl = `http://127.0.0.1:${await listen(janus, 0, '127.0.0.1')}`;
  });

  afterAll(async () => {
    await new Promise((resolve) => janus?.close(resolve));
  });

  test("Janus's login: wrong credentials are an error; none are a usage error", async () => {
    const wrong = await cli(['import', '--from-janus', janusUrl, '--janus-user', 'janus-admin', '--janus-password', 'nope']);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toBe(`error: Janus login at ${janusUrl}/login failed (HTTP 401)\n`);
    const none = await cli(['import', '--from-janus', janusUrl]);
    expect(none.code).toBe(2);
  });

  test('dry run, then --apply as one version; credentials from JANUS_USER / JANUS_PASSWORD', async () => {
    const env = { JANUS_USER: 'janus-admin', JANUS_PASSWORD: 'janus-password' };
    const dry = await cli(['-o', 'json', 'import', '--from-janus', janusUrl], env);
    expect(dry.code).toBe(EXIT_CHANGES);
    expect(logins.at(-1)).toEqual({ username: 'janus-admin', password: 'janus-password' });
    const [item] = JSON.parse(dry.stdout).items;
    expect(item).toMatchObject({ kind: 'api', name: 'live-api', status: 'changed' });
    expect(item.differences.join()).toContain('cors: credentials not allowed');
    // Go's zero weight is dropped (Gatehouse's weights start at 1), the zero dial timeout is the same 30s default.
    expect(item.definition.proxy.upstreams.targets).toEqual([{ target: `${upstream.url}/live` }]);

    const before = await currentVersion();
    const applied = await cli(['import', '--from-janus', janusUrl, '--apply'], env);
    expect(applied.code).toBe(EXIT_CHANGES);
    expect(await currentVersion()).toBe(before + 1);
    await admin.waitForDataPlanes(before + 1, [dp]);
    expect((await dp.request('GET', '/live/a')).status).toBe(200);
    expect(upstream.last()?.url).toBe('/live/a');
  });
});
