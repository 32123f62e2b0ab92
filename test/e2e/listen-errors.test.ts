/**
 * A listener that cannot bind stops its service with one line naming the variable and the port,
 * exit code 1 and no stack trace: for each of the four listeners (CP admin, CP gRPC, DP proxy, DP status).
 * So does a malformed LOG_FORMAT or LOG_LEVEL.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listen } from '#proto/listen';
import { spawnService } from '../helpers/service-process.js';
import { CONTROL_PLANE_SCRIPT } from '../helpers/start-control-plane.js';
import { DATA_PLANE_SCRIPT } from '../helpers/start-data-plane.js';

let blocker: Server;
let busy: number;
let dataDir: string;

beforeAll(async () => {
  blocker = createServer();
  busy = await listen(blocker, 0, '127.0.0.1');
  dataDir = await mkdtemp(join(tmpdir(), 'gatehouse-listen-errors-'));
});

afterAll(async () => {
  await new Promise<void>((resolve) => blocker.close(() => resolve()));
  await rm(dataDir, { recursive: true, force: true });
});

const CP = CONTROL_PLANE_SCRIPT;
const DP = DATA_PLANE_SCRIPT;
const cpEnv = () => ({
  ADMIN_HOST: '127.0.0.1',
  GRPC_HOST: '127.0.0.1',
  ADMIN_PORT: '0',
  GRPC_PORT: '0',
  DATA_DIR: dataDir,
  ADMIN_PASSWORD: 'listen-errors-test',
});
const dpEnv = () => ({ PROXY_HOST: '127.0.0.1', STATUS_HOST: '127.0.0.1', PROXY_PORT: '0', STATUS_PORT: '0', CONTROL_PLANE_ADDR: '127.0.0.1:1' });

/** A stack frame as V8 prints it, raw or inside a JSON string. */
const STACK_FRAME = /\bat .*(\.js|\.ts|node:internal)[^ ]*:\d+/;

test.each([
  ['CP admin', CP, cpEnv, 'ADMIN_PORT', 'admin'],
  ['CP gRPC', CP, cpEnv, 'GRPC_PORT', 'grpc'],
  ['DP proxy', DP, dpEnv, 'PROXY_PORT', 'proxy'],
  ['DP status', DP, dpEnv, 'STATUS_PORT', 'status'],
])('%s: a port in use is one line naming %s and the port, exit 1, no stack', async (name, script, env, variable, listener) => {
  const service = await spawnService({ name, script, env: { ...env(), [variable]: String(busy) }, listeners: [] });
  const status = await service.exited;
  expect(status).toEqual({ code: 1, signal: null });
  const lines = service.lines();
  const naming = lines.filter((line) => line.raw.includes(`${variable} ${busy}`));
  expect(naming).toHaveLength(1);
  expect(naming[0]!.json).toMatchObject({ level: 60, msg: `${variable} ${busy} is already in use on 127.0.0.1`, listener, port: busy, code: 'EADDRINUSE' });
  expect(naming[0]!.json).not.toHaveProperty('err');
  expect(lines.filter((line) => line.raw.startsWith('[stderr]'))).toEqual([]);
  expect(lines.filter((line) => STACK_FRAME.test(line.raw))).toEqual([]);
});

test('LOG_FORMAT=pretty: the same failure is one human-readable line', async () => {
  const service = await spawnService({ name: 'DP pretty', script: DP, env: { ...dpEnv(), PROXY_PORT: String(busy), LOG_FORMAT: 'pretty' }, listeners: [] });
  expect((await service.exited).code).toBe(1);
  const naming = service.lines().filter((line) => line.raw.includes(`PROXY_PORT ${busy}`));
  expect(naming).toHaveLength(1);
  expect(naming[0]!.json).toBeUndefined();
  expect(naming[0]!.raw).toMatch(new RegExp(`FATAL.*PROXY_PORT ${busy} is already in use on 127\\.0\\.0\\.1`));
});

test('an unknown LOG_FORMAT stops the service with a message naming LOG_FORMAT', async () => {
  const service = await spawnService({ name: 'DP bad format', script: DP, env: { ...dpEnv(), LOG_FORMAT: 'xml' }, listeners: [] });
  expect((await service.exited).code).toBe(1);
  expect(service.recentLogs()).toContain('ConfigError: LOG_FORMAT: expected \\"json\\" or \\"pretty\\", got \\"xml\\"');
});

test('several malformed variables: one fatal line names every one of them', async () => {
  const service = await spawnService({ name: 'DP bad env', script: DP, env: { ...dpEnv(), STATUS_PORT: 'http', WORKERS: 'max' }, listeners: [] });
  expect((await service.exited).code).toBe(1);
  const fatal = service.lines().filter((line) => line.json?.level === 60);
  expect(fatal.map((line) => [line.json?.msg, line.json?.err])).toEqual([
    [
      'invalid configuration',
      'ConfigError: STATUS_PORT: expected a port number 0-65535, got "http"; WORKERS: expected "auto" or a whole number from 1 to 64, got "max"',
    ],
  ]);
});

test.each([
  ['CP', CP, cpEnv],
  ['DP', DP, dpEnv],
])('%s: an unknown LOG_LEVEL stops the service with one line naming LOG_LEVEL, exit 1, no stack', async (name, script, env) => {
  const service = await spawnService({ name: `${name} bad level`, script, env: { ...env(), LOG_LEVEL: 'verbose' }, listeners: [] });
  expect(await service.exited).toEqual({ code: 1, signal: null });
  const lines = service.lines();
  const naming = lines.filter((line) => line.raw.includes('LOG_LEVEL'));
  expect(naming).toHaveLength(1);
  expect(naming[0]!.json).toMatchObject({
    level: 60,
    err: 'ConfigError: LOG_LEVEL: expected one of fatal, error, warn, info, debug, trace, silent, got "verbose"',
  });
  expect(lines.filter((line) => line.raw.startsWith('[stderr]'))).toEqual([]);
  expect(lines.filter((line) => STACK_FRAME.test(line.raw))).toEqual([]);
});
