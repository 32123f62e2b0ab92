/**
 * `npm start` as a user runs it (the real package script): a SIGTERM to npm, or the death of the
 * process that ran npm, stops both services and frees their ports; the generated admin password
 * file is announced only once it exists and the control plane listens; the data plane syncs with
 * the join token the control plane generated, which a local process without it does not have.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readFile } from 'node:fs/promises';
import * as grpc from '@grpc/grpc-js';
import { CHANNEL_OPTIONS, loadGatehouseProto } from '#proto/grpc';
import { listen } from '#proto/listen';
import { httpRequest } from '../helpers/http-request.js';
import { npmStart, processAlive, type NpmStart } from '../helpers/npm-start.js';
import { pollUntil } from '../helpers/poll-until.js';

/** npm itself takes seconds to start on a busy machine. */
const TIMEOUT_MS = 120_000;

const EPHEMERAL = { ADMIN_PORT: '0', GRPC_PORT: '0', PROXY_PORT: '0', STATUS_PORT: '0', LOG_FORMAT: 'json', SHUTDOWN_TIMEOUT: '3s' };

let dataDir: string;
let started: NpmStart | undefined;

beforeEach(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'gatehouse-npm-start-'));
});

afterEach(async () => {
  started?.killAll();
  started = undefined;
  await rm(dataDir, { recursive: true, force: true });
});

async function portFree(port: number): Promise<boolean> {
  const probe = createServer();
  try {
    await listen(probe, port, '127.0.0.1');
    return true;
  } catch {
    return false;
  } finally {
    await new Promise<void>((resolve) => probe.close(() => resolve()));
  }
}

/** Both services exited and none of their four ports is held any more. */
async function expectAllGone(run: NpmStart, services: Awaited<ReturnType<NpmStart['services']>>): Promise<void> {
  const ports = [...Object.values(services.cp.ports), ...Object.values(services.dp.ports)];
  await pollUntil(async () => (!processAlive(services.cp.pid) && !processAlive(services.dp.pid) ? true : undefined), {
    what: `control plane (pid ${services.cp.pid}) and data plane (pid ${services.dp.pid}) to exit`,
    timeoutMs: 20_000,
    details: () => run.lines().slice(-30).join('\n'),
  });
  for (const port of ports) expect(await portFree(port)).toBe(true);
}

test(
  'SIGTERM to npm start stops both services and frees their ports',
  async () => {
    started = npmStart({ env: { ...EPHEMERAL, DATA_DIR: dataDir, ADMIN_PASSWORD: 'npm-start-test-password' } });
    const services = await started.services();
    expect(processAlive(services.cp.pid) && processAlive(services.dp.pid)).toBe(true);

    started.child.kill('SIGTERM');
    await expectAllGone(started, services);
  },
  TIMEOUT_MS,
);

test(
  'the death of the process that ran npm start stops both services and frees their ports',
  async () => {
    started = npmStart({ env: { ...EPHEMERAL, DATA_DIR: dataDir, ADMIN_PASSWORD: 'npm-start-test-password' }, viaIntermediate: true });
    const services = await started.services();

    started.child.kill('SIGKILL');
    await started.exited;
    await expectAllGone(started, services);
    expect(started.lines()).toContain('[start] the process that started gatehouse is gone: stopping');
  },
  TIMEOUT_MS,
);

test(
  'the generated password file is announced after it is written and the control plane listens',
  async () => {
    started = npmStart({ env: { ...EPHEMERAL, DATA_DIR: dataDir } });
    const passwordFile = join(dataDir, 'admin-password');
    const announcements: { line: string; fileExisted: boolean; adminListening: boolean }[] = [];
    started.onLine((line) => {
      if (line.startsWith('[start] admin credentials:')) {
        announcements.push({
          line,
          fileExisted: existsSync(passwordFile),
          adminListening: started!.lines().some((l) => /"listener":"admin"/.test(l) && /"msg":"listening"/.test(l)),
        });
      }
    });
    await started.services();
    expect(announcements).toEqual([{ line: `[start] admin credentials: admin / password in ${passwordFile}`, fileExisted: true, adminListening: true }]);
  },
  TIMEOUT_MS,
);

test(
  'a start that fails (admin port taken) announces no password file',
  async () => {
    const blocker: Server = createServer();
    const busy = await listen(blocker, 0, '127.0.0.1');
    try {
      started = npmStart({ env: { ...EPHEMERAL, ADMIN_PORT: String(busy), DATA_DIR: dataDir } });
      const status = await started.exited;
      expect(status.code).not.toBe(0);
      expect(started.lines().filter((line) => line.includes('admin credentials'))).toEqual([]);
      expect(started.lines().some((line) => line.includes(`ADMIN_PORT ${busy} is already in use`))).toBe(true);
    } finally {
      await new Promise<void>((resolve) => blocker.close(() => resolve()));
    }
  },
  TIMEOUT_MS,
);

/** The final status of a snapshot stream opened without any credential, and the pushes it got. */
async function streamWithoutToken(address: string): Promise<{ code: grpc.status; pushes: number }> {
  const proto = loadGatehouseProto();
  const client = new proto.Client(address, grpc.credentials.createInsecure(), { ...CHANNEL_OPTIONS, 'grpc.use_local_subchannel_pool': 1 });
  const call = (client.StreamSnapshots as (m: grpc.Metadata) => grpc.ClientDuplexStream<object, unknown>).call(client, new grpc.Metadata());
  let pushes = 0;
  call.on('data', () => {
    pushes++;
    call.cancel();
  });
  call.on('error', () => undefined);
  call.write({ hello: { id: 'local-intruder', hostname: 'intruder' } });
  const status = await new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
  client.close();
  return { code: status.code, pushes };
}

test(
  'the data plane syncs with the join token the control plane generated; a local process without it reads nothing',
  async () => {
    started = npmStart({ env: { ...EPHEMERAL, DATA_DIR: dataDir, ADMIN_PASSWORD: 'npm-start-test-password' } });
    const services = await started.services();
    const tokenFile = join(dataDir, 'grpc-join-token');
    expect(started.lines()).toContain(`[start] data plane join token: in ${tokenFile}`);
    expect((await readFile(tokenFile, 'utf8')).trim().length).toBeGreaterThanOrEqual(32);
    await pollUntil(async () => ((await httpRequest(`http://127.0.0.1:${services.dp.ports.status}/readyz`)).status === 200 ? true : undefined), {
      what: 'the data plane to apply a snapshot',
      timeoutMs: 30_000,
      details: () => started!.lines().slice(-30).join('\n'),
    });
    expect(await streamWithoutToken(`127.0.0.1:${services.cp.ports.grpc}`)).toEqual({ code: grpc.status.UNAUTHENTICATED, pushes: 0 });
  },
  TIMEOUT_MS,
);
