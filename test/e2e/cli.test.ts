/**
 * The `gatehouse` CLI as a real process (`node cli/dist/main.js`) against a real control plane and
 * data plane: login keeps a 0600 token under XDG_CONFIG_HOME, resources from YAML, export/import,
 * history/rollback, explain, `--output json` for scripts, and exit codes with the API's message.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { createAdminClient, type AdminClient } from '../helpers/admin-client.js';
import { startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';
import { startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';
import { pollUntil } from '../helpers/poll-until.js';

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

let cp: ControlPlane;
let dp: DataPlane;
let upstream: Upstream;
let admin: AdminClient;
let work: string;
/** XDG_CONFIG_HOME of the shared, logged-in session. */
let configHome: string;

function cli(args: string[], options: { env?: Record<string, string>; input?: string; home?: string } = {}): Promise<CliRun> {
  const env: Record<string, string> = { PATH: process.env.PATH ?? '', XDG_CONFIG_HOME: options.home ?? configHome, GATEHOUSE_URL: cp.adminUrl, ...options.env };
  return new Promise((resolve) => {
    const child = execFile(process.execPath, ['cli/dist/main.js', ...args], { env, timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
    child.stdin?.end(options.input ?? '');
  });
}

/** Runs and expects exit 0 (with the output in the failure message). */
async function ok(args: string[], options?: Parameters<typeof cli>[1]): Promise<string> {
  const run = await cli(args, options);
  if (run.code !== 0) throw new Error(`gatehouse ${args.join(' ')} exited ${run.code}\n${run.stderr}${run.stdout}`);
  return run.stdout;
}

async function file(name: string, content: string): Promise<string> {
  const path = join(work, name);
  await writeFile(path, content);
  return path;
}

const apiYaml = (name: string, listenPath: string, extra = '') => `name: ${name}
proxy:
  listen_path: ${listenPath}
  upstreams:
    balancing: roundrobin
    targets:
      - target: ${upstream.url}
${extra}`;

beforeAll(async () => {
  upstream = await startUpstream('cli-upstream');
  cp = await startControlPlane({ name: 'cp-cli' });
  dp = await startDataPlane({ controlPlaneAddr: cp.grpcAddr, id: 'dp-cli' });
  admin = await createAdminClient(cp);
  work = await mkdtemp(join(tmpdir(), 'gatehouse-cli-'));
  configHome = join(work, 'config');
  await ok(['login', '--password', cp.password]);
}, 60_000);

afterAll(async () => {
  await dp?.stop();
  await cp?.dispose();
  await upstream?.close();
  if (work) await rm(work, { recursive: true, force: true });
});

test('login keeps the token in $XDG_CONFIG_HOME/gatehouse/ with mode 0600 (password from the option, env or stdin)', async () => {
  for (const [how, args, env, input] of [
    ['option', ['login', '--password', cp.password], {}, ''],
    ['env', ['login'], { GATEHOUSE_PASSWORD: cp.password }, ''],
    ['stdin', ['login', '-u', 'admin'], {}, `${cp.password}\n`],
  ] as const) {
    const home = await mkdtemp(join(work, `login-${how}-`));
    const out = await ok([...args], { home, env, input });
    expect(out).toContain(`logged in to ${cp.adminUrl} as admin`);
    const path = join(home, 'gatehouse', 'session.json');
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect((await stat(join(home, 'gatehouse'))).mode & 0o777).toBe(0o700);
    const session = JSON.parse(await readFile(path, 'utf8'));
    expect(session.server).toBe(cp.adminUrl);
    // The kept token works for the next command.
    expect(JSON.parse(await ok(['--output', 'json', 'apis', 'list'], { home }))).toEqual(expect.any(Array));
  }
});

test('apis: apply -f YAML (several documents) creates, re-apply is unchanged, a changed file configures, get/list/delete', async () => {
  const path = await file('apis.yaml', `${apiYaml('cli-one', '/cli/one/*')}---\n${apiYaml('cli-two', '/cli/two/*', 'hosts: [two.example.com]\n')}`);
  expect(await ok(['apis', 'apply', '-f', path])).toBe('api/cli-one created\napi/cli-two created\n');
  expect(await ok(['apis', 'apply', '-f', path])).toBe('api/cli-one unchanged\napi/cli-two unchanged\n');

  // Removing a member in the file removes it on the server (the default comes back).
  await writeFile(path, apiYaml('cli-two', '/cli/two/*'));
  expect(await ok(['apis', 'apply', '-f', path])).toBe('api/cli-two configured\n');
  expect((await admin.getApi('cli-two')).body.hosts).toEqual([]);

  const table = await ok(['apis', 'list']);
  expect(table.split('\n')[0]).toMatch(/^NAME\s+ACTIVE\s+LISTEN PATH\s+HOSTS\s+METHODS\s+TARGETS\s+PLUGINS$/);
  expect(table).toMatch(/cli-one\s+true\s+\/cli\/one\/\*/);
  const listed = JSON.parse(await ok(['-o', 'json', 'apis', 'list']));
  expect(listed.map((a: any) => a.name)).toEqual(expect.arrayContaining(['cli-one', 'cli-two']));
  expect(JSON.parse(await ok(['apis', 'get', 'cli-one', '--output', 'json']))).toEqual((await admin.getApi('cli-one')).body);
  expect(yaml.load(await ok(['apis', 'get', 'cli-one', '-o', 'yaml']))).toEqual((await admin.getApi('cli-one')).body);

  expect(await ok(['apis', 'delete', 'cli-one', 'cli-two'])).toBe('api/cli-one deleted\napi/cli-two deleted\n');
  const gone = await cli(['apis', 'get', 'cli-one']);
  expect(gone.code).toBe(1);
  expect(gone.stderr).toBe('error: api definition not found (HTTP 404)\n');
});

test('oauth-servers: apply -f JSON, list, get, delete', async () => {
  const server = {
    name: 'cli-auth',
    oauth_endpoints: { token: { listen_path: '/cli-auth/token', upstreams: { targets: [{ target: `${upstream.url}/token` }] } } },
    token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: 'a-shared-secret-of-some-length-0123' }] },
  };
  const path = await file('server.json', JSON.stringify(server));
  expect(JSON.parse(await ok(['-o', 'json', 'oauth-servers', 'apply', '-f', path]))).toEqual([{ kind: 'oauth-server', name: 'cli-auth', result: 'created' }]);
  expect(await ok(['oauth-servers', 'list'])).toMatch(/cli-auth\s+jwt\s+\/cli-auth\/token/);
  expect(JSON.parse(await ok(['-o', 'json', 'oauth-servers', 'get', 'cli-auth'])).token_strategy.name).toBe('jwt');
  // The key is write-only: `get` and `export` show the marker, `export --include-secrets` the key.
  expect(JSON.parse(await ok(['-o', 'json', 'oauth-servers', 'get', 'cli-auth'])).token_strategy.settings).toEqual([{ alg: 'HS256', key: '<redacted>' }]);
  expect(await ok(['export'])).not.toContain('a-shared-secret-of-some-length');
  expect(await ok(['export', '--include-secrets'])).toContain('a-shared-secret-of-some-length');
  expect(await ok(['oauth-servers', 'delete', 'cli-auth'])).toBe('oauth-server/cli-auth deleted\n');
});

test('export → import round trip, import --dry-run shows the diff and writes nothing', async () => {
  await ok(['apis', 'apply', '-f', await file('rt.yaml', apiYaml('cli-rt', '/cli/rt/*'))]);
  const exportPath = join(work, 'exported.yaml');
  await ok(['export', '-f', exportPath]);
  expect((await stat(exportPath)).mode & 0o777).toBe(0o600);
  const exported = await readFile(exportPath, 'utf8');
  expect(yaml.load(exported)).toEqual((await admin.request('GET', '/config')).body);

  const edited = yaml.load(exported) as any;
  edited.apis = edited.apis.filter((a: any) => a.name !== 'cli-rt');
  const editedPath = await file('edited.yaml', yaml.dump(edited));
  const before = (await admin.request('GET', '/config')).snapshotVersion;
  const dry = await ok(['import', '-f', editedPath, '--dry-run']);
  expect(dry).toContain('dry run: nothing written');
  expect(dry).toMatch(/apis\s+-\s+-\s+cli-rt/);
  expect((await admin.request('GET', '/config')).snapshotVersion).toBe(before);

  const applied = JSON.parse(await ok(['-o', 'json', 'import', '-f', editedPath]));
  expect(applied).toMatchObject({ changed: true, version: before! + 1, diff: { apis: { removed: ['cli-rt'] } } });
  expect((await admin.getApi('cli-rt')).status).toBe(404);

  const back = JSON.parse(await ok(['-o', 'json', 'import', '-f', exportPath]));
  expect(back.changed).toBe(true);
  expect(await ok(['export'])).toBe(exported);
});

test('history lists versions; rollback restores one and the data plane serves it', async () => {
  const created = JSON.parse(await ok(['-o', 'json', 'apis', 'apply', '-f', await file('rb.yaml', apiYaml('cli-rb', '/cli/rb/*'))]));
  expect(created[0].result).toBe('created');
  const version = (await admin.request('GET', '/config')).snapshotVersion!;
  await ok(['apis', 'delete', 'cli-rb']);

  const history = JSON.parse(await ok(['history', '-o', 'json']));
  expect(history[0]).toMatchObject({ action: 'DELETE /apis/cli-rb', author: 'admin', user_agent: 'gatehouse-cli' });
  expect(await ok(['history'])).toMatch(/^VERSION\s+TIME\s+AUTHOR\s+ACTION/);

  const out = await ok(['rollback', String(version)]);
  expect(out).toContain(`restored version ${version}: now version ${version + 2}`);
  await admin.waitForDataPlanes(version + 2, [dp]);
  expect((await dp.request('GET', '/cli/rb/x')).status).toBe(200);
});

test('dataplanes and explain', async () => {
  const planes = JSON.parse(await ok(['dataplanes', '-o', 'json']));
  expect(planes.map((d: any) => d.id)).toContain('dp-cli');
  expect(await ok(['dataplanes'])).toMatch(/dp-cli/);

  await ok(['apis', 'apply', '-f', await file('ex.yaml', apiYaml('cli-ex', '/cli/ex/*'))]);
  const explained = JSON.parse(await ok(['-o', 'json', 'explain', 'GET', '/cli/ex/a?b=1', '--host', 'x.test']));
  expect(explained.route).toMatchObject({ name: 'cli-ex' });
  expect(explained.upstreams[0].url).toBe(`${upstream.url}/cli/ex/a?b=1`);
  const human = await ok(['explain', 'GET', '/cli/ex/a']);
  expect(human).toContain('route:     api "cli-ex"');
  expect(await ok(['explain', 'GET', '/nowhere'])).toContain('route:     none');
});

/** Polls the data plane until `path` with `headers` answers `status` (a credential change reaches it with its snapshot). */
async function dpAnswers(path: string, headers: Record<string, string>, status: number): Promise<void> {
  await pollUntil(async () => ((await dp.request('GET', path, { headers })).status === status ? true : undefined), { what: `${path} to answer ${status}` });
}
const basicHeader = (user: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` });

test('basic-auth: create (password by option or stdin), list, set-password, delete; the data plane follows each', async () => {
  await ok(['apis', 'apply', '-f', await file('ba.yaml', apiYaml('cli-ba', '/cli/ba/*', 'plugins:\n  - name: basic_auth\n'))]);
  expect(await ok(['basic-auth', 'create', 'cli-ann', '--password', 'ann password one'])).toBe('basic-auth/cli-ann created\n');
  expect(await ok(['basic-auth', 'create', 'cli-bob'], { input: 'bob password one\n' })).toBe('basic-auth/cli-bob created\n');
  expect(await ok(['basic-auth', 'list'])).toMatch(/^USERNAME\s+GROUPS\n(.*\n)*cli-ann\s+-\n(.*\n)*cli-bob/);
  expect(JSON.parse(await ok(['basic-auth', 'list', '-o', 'json']))).toEqual(expect.arrayContaining([{ username: 'cli-ann' }, { username: 'cli-bob' }]));
  await dpAnswers('/cli/ba/x', basicHeader('cli-bob', 'bob password one'), 200);

  expect(await ok(['basic-auth', 'set-password', 'cli-bob'], { input: 'bob password two\n' })).toBe('basic-auth/cli-bob configured\n');
  await dpAnswers('/cli/ba/x', basicHeader('cli-bob', 'bob password two'), 200);
  expect((await dp.request('GET', '/cli/ba/x', { headers: basicHeader('cli-bob', 'bob password one') })).status).toBe(401);

  expect(JSON.parse(await ok(['-o', 'json', 'basic-auth', 'delete', 'cli-ann', 'cli-bob']))).toEqual([
    { kind: 'basic-auth', username: 'cli-ann', result: 'deleted' },
    { kind: 'basic-auth', username: 'cli-bob', result: 'deleted' },
  ]);
  await dpAnswers('/cli/ba/x', basicHeader('cli-bob', 'bob password two'), 401);
  expect((await cli(['basic-auth', 'create', 'cli-short', '--password', 'x'])).code).toBe(1);
});

test('key-auth: create prints the server-made key once, rotate makes and prints a new one, --key keeps it off the output, delete', async () => {
  await ok(['apis', 'apply', '-f', await file('ka.yaml', apiYaml('cli-ka', '/cli/ka/*', 'plugins:\n  - name: key_auth\n'))]);
  const created = JSON.parse(await ok(['-o', 'json', 'key-auth', 'create', 'cli-kay']));
  expect(created).toEqual({ kind: 'key-auth', username: 'cli-kay', result: 'created', key: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
  await dpAnswers('/cli/ka/x', { apikey: created.key }, 200);

  const rotated = await ok(['key-auth', 'rotate', 'cli-kay']);
  const newKey = /^key-auth\/cli-kay configured; its key, shown only now: ([A-Za-z0-9_-]{43})\n$/.exec(rotated)?.[1];
  expect(newKey).toBeDefined();
  await dpAnswers('/cli/ka/x', { apikey: newKey! }, 200);
  expect((await dp.request('GET', '/cli/ka/x', { headers: { apikey: created.key } })).status).toBe(401);

  expect(await ok(['key-auth', 'create', 'cli-own', '--key', 'my-own-key-0123456789'])).toBe('key-auth/cli-own created\n');
  await dpAnswers('/cli/ka/x', { apikey: 'my-own-key-0123456789' }, 200);
  expect(await ok(['key-auth', 'list'])).toMatch(/cli-kay[\s\S]*cli-own|cli-own[\s\S]*cli-kay/);
  expect(await ok(['key-auth', 'list'])).not.toContain(newKey!);
  expect(await ok(['key-auth', 'delete', 'cli-kay', 'cli-own'])).toBe('key-auth/cli-kay deleted\nkey-auth/cli-own deleted\n');
  await dpAnswers('/cli/ka/x', { apikey: 'my-own-key-0123456789' }, 401);
});

test('consumer groups: create --groups, list shows them, set-groups replaces them (keeping the secret) or removes them; acl follows', async () => {
  await ok([
    'apis',
    'apply',
    '-f',
    await file('acl.yaml', apiYaml('cli-acl', '/cli/acl/*', 'plugins:\n  - name: key_auth\n  - name: acl\n    config: {allow: [admins]}\n')),
  ]);
  expect(await ok(['key-auth', 'create', 'cli-grp', '--key', 'cli-grp-key-0123456789', '--groups', 'Ops, admins'])).toBe('key-auth/cli-grp created\n');
  expect(await ok(['basic-auth', 'create', 'cli-grp-user', '--password', 'grp password one', '-g', 'partners'])).toBe('basic-auth/cli-grp-user created\n');
  expect(await ok(['key-auth', 'list'])).toMatch(/^USERNAME\s+GROUPS\n(.*\n)*cli-grp\s+admins,ops\n/);
  expect(JSON.parse(await ok(['basic-auth', 'list', '-o', 'json']))).toEqual(expect.arrayContaining([{ username: 'cli-grp-user', groups: ['partners'] }]));
  await dpAnswers('/cli/acl/x', { apikey: 'cli-grp-key-0123456789' }, 200);
  expect(await ok(['key-auth', 'set-groups', 'cli-grp', 'ops'])).toBe('key-auth/cli-grp configured\n');
  await dpAnswers('/cli/acl/x', { apikey: 'cli-grp-key-0123456789' }, 403);
  expect(await ok(['key-auth', 'set-groups', 'cli-grp'])).toBe('key-auth/cli-grp configured\n');
  expect(JSON.parse(await ok(['key-auth', 'list', '-o', 'json']))).toEqual(expect.arrayContaining([{ username: 'cli-grp' }]));
  const bad = await cli(['key-auth', 'set-groups', 'cli-grp', 'a b']);
  expect(bad).toMatchObject({ code: 1, stderr: 'error: groups[0] must be 1-64 characters of a-z 0-9 . _ - (any case) (HTTP 400)\n' });
  await ok(['key-auth', 'delete', 'cli-grp']);
  await ok(['basic-auth', 'delete', 'cli-grp-user']);
});

test('errors: one line on stderr with the API message and a non-zero exit', async () => {
  const invalid = await cli(['apis', 'apply', '-f', await file('bad.yaml', 'name: bad\nproxy:\n  upstreams:\n    targets: [{target: "http://u"}]\n')]);
  expect(invalid).toMatchObject({ code: 1, stderr: 'error: proxy.listen_path is required (HTTP 400)\n' });

  const badImport = await cli(['import', '-f', await file('bad-config.yaml', 'apis:\n  - name: x\n')]);
  expect(badImport.code).toBe(1);
  expect(badImport.stderr).toBe('error: apis[0].proxy.listen_path is required (HTTP 400)\n');

  const home = await mkdtemp(join(work, 'nobody-'));
  const notLoggedIn = await cli(['apis', 'list'], { home });
  expect(notLoggedIn.code).toBe(1);
  expect(notLoggedIn.stderr).toContain(`not logged in to ${cp.adminUrl}`);

  const wrongPassword = await cli(['login', '--password', 'wrong-password'], { home });
  expect(wrongPassword.code).toBe(1);
  expect(wrongPassword.stderr).toMatch(/^error: .* \(HTTP 401\)/);

  const unreachable = await cli(['apis', 'list', '--server', 'http://127.0.0.1:1'], { env: { GATEHOUSE_TOKEN: 'any' } });
  expect(unreachable.code).toBe(1);
  expect(unreachable.stderr).toContain('cannot reach http://127.0.0.1:1');

  expect((await cli(['rollback', '999999'])).stderr).toContain('(HTTP 404)');
  expect((await cli(['apis', 'frobnicate'])).code).toBe(2);
  expect((await cli(['apis', 'list', '--output', 'xml'])).code).toBe(2);
  expect((await cli(['rollback', 'latest'])).code).toBe(2);
  expect((await cli(['apis', 'apply', '-f', join(work, 'missing.yaml')])).stderr).toContain('cannot read');
});
