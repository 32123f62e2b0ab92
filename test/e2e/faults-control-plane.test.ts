/**
 * Control-plane faults with figures: a CP SIGKILLed in the middle of concurrent
 * admin writes loses no acknowledged write; a damaged store file stops the CP with a message
 * naming the file and is left as it was; a CP killed and restarted under constant proxied load
 * costs the data plane no request. Each test starts its own processes and prints its figures.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAdminClient } from '../helpers/admin-client.js';
import { apiDefinition } from '../helpers/api-definition.js';
import { startLoad, stopAllLoads } from '../helpers/load-generator.js';
import { delay, pollUntil } from '../helpers/poll-until.js';
import { spawnService } from '../helpers/service-process.js';
import { CONTROL_PLANE_SCRIPT, startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';
import { startGateway } from '../helpers/start-gateway.js';
import { startUpstream } from '../helpers/upstream-server.js';

// A test that fails while its load runs must not leave the load running into the next ones.
afterEach(stopAllLoads);

const STORE_FILE = 'store.json';

test('SIGKILL during 200 concurrent admin writes, 3 rounds: every acknowledged write survives and the store loads', async () => {
  const WRITES = 200;
  const ROUNDS = 3;
  /** The kill is sent when this many writes of the round have been acknowledged. */
  const KILL_AT_ACK = 50;
  let cp: ControlPlane | undefined;
  try {
    cp = await startControlPlane({ name: 'cp-sigkill' });
    const acknowledged: string[] = [];
    const figures: string[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const admin = await createAdminClient(cp);
      const roundAcks: string[] = [];
      let killed: Promise<unknown> | undefined;
      const writes = Array.from({ length: WRITES }, async (_, i) => {
        const name = `r${round}-w${i}`;
        try {
          const res = await admin.createApi(apiDefinition({ name, listenPath: `/${name}/*`, targets: ['http://127.0.0.1:9'] }));
          if (res.status !== 201) return `${name}: ${res.status} ${res.text}`;
          roundAcks.push(name);
          if (roundAcks.length === KILL_AT_ACK) killed = cp!.kill();
        } catch {
          // The connection died with the CP: not acknowledged, may or may not be stored.
        }
        return undefined;
      });
      const refused = (await Promise.all(writes)).filter((r) => r !== undefined);
      expect(refused).toEqual([]);
      expect(killed).toBeDefined();
      expect((await killed) as unknown).toEqual({ code: null, signal: 'SIGKILL' });
      acknowledged.push(...roundAcks);

      const onDisk: unknown = JSON.parse(await readFile(join(cp.dataDir, STORE_FILE), 'utf8'));
      expect(onDisk).toMatchObject({ apis: expect.any(Array) });
      await cp.restart();
      const stored = new Set(((await (await createAdminClient(cp)).listApis()).body ?? []).map((api: { name: string }) => api.name));
      const lost = acknowledged.filter((name) => !stored.has(name));
      expect(lost).toEqual([]);
      const roundStored = [...stored].filter((name) => name.startsWith(`r${round}-`)).length;
      figures.push(`round ${round}: ${roundAcks.length} acknowledged, ${roundStored} stored, ${lost.length} lost`);
    }
    // A write killed between its temp file and the rename leaves the temp behind; the restart removes it.
    const leftovers = (await readdir(cp.dataDir)).filter((file) => file.endsWith('.tmp'));
    expect(leftovers).toEqual([]);
    console.log(
      `CP SIGKILL during ${WRITES} concurrent admin writes ×${ROUNDS}: ${acknowledged.length} acknowledged, 0 lost, store loads (${figures.join('; ')}; ${leftovers.length} temp files left)`,
    );
  } finally {
    await cp?.dispose();
  }
}, 90_000);

test('a truncated or corrupt store file: the CP refuses to start, names the file, and leaves it untouched', async () => {
  // A real store file to damage: what a CP wrote after two writes.
  const source = await startControlPlane({ name: 'cp-store-source' });
  let valid: string;
  try {
    const admin = await createAdminClient(source);
    for (const name of ['one', 'two'])
      expect((await admin.createApi(apiDefinition({ name, listenPath: `/${name}/*`, targets: ['http://127.0.0.1:9'] }))).status).toBe(201);
    valid = await readFile(join(source.dataDir, STORE_FILE), 'utf8');
  } finally {
    await source.dispose();
  }
  const cases: Array<[string, Buffer]> = [
    ['truncated mid-JSON', Buffer.from(valid.slice(0, Math.floor(valid.length / 2)))],
    ['garbage bytes', randomBytes(512)],
    ['valid JSON of the wrong shape (array)', Buffer.from('[1, 2, 3]\n')],
    ['valid JSON of the wrong shape (null)', Buffer.from('null\n')],
    ['valid JSON of the wrong shape (apis is an object)', Buffer.from('{"revision": 3, "apis": {}, "oauth_servers": []}\n')],
    ['an invalid definition inside', Buffer.from('{"revision": 3, "apis": [{"name": "x"}], "oauth_servers": []}\n')],
    ['empty', Buffer.alloc(0)],
  ];
  const figures: string[] = [];
  for (const [what, bytes] of cases) {
    const dataDir = await mkdtemp(join(tmpdir(), 'gatehouse-corrupt-'));
    try {
      const path = join(dataDir, STORE_FILE);
      await writeFile(path, bytes, { mode: 0o600 });
      const cp = await spawnService({
        name: `cp-corrupt (${what})`,
        script: CONTROL_PLANE_SCRIPT,
        env: { ADMIN_HOST: '127.0.0.1', GRPC_HOST: '127.0.0.1', ADMIN_PORT: '0', GRPC_PORT: '0', ADMIN_PASSWORD: 'corrupt-store-test', DATA_DIR: dataDir },
        listeners: [],
      });
      const status = await Promise.race([cp.exited, delay(15_000).then(() => cp.kill())]);
      const context = `${what}\n${cp.recentLogs()}`;
      expect({ context, signal: status.signal, refused: status.code !== 0 }).toEqual({ context, signal: null, refused: true });
      expect({ context, listening: cp.lines().some((line) => line.json?.msg === 'listening') }).toEqual({ context, listening: false });
      const fatal = cp.lines().find((line) => line.json?.level === 60);
      expect({ context, msg: fatal?.json?.msg }).toEqual({ context, msg: expect.stringContaining(path) });
      expect((await readFile(path)).equals(bytes)).toBe(true);
      figures.push(`${what} → exit ${status.code}: ${String(fatal?.json?.msg)}`);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  }
  console.log(`corrupt store file, ${cases.length} cases: CP refused to start each time, file unchanged\n  ${figures.join('\n  ')}`);
}, 60_000);

test('CP SIGKILLed and restarted twice under constant proxied load: no proxied request fails', async () => {
  const upstream = await startUpstream('steady');
  const gw = await startGateway({ controlPlane: { name: 'cp-restart-under-load' } });
  try {
    const created = await gw.admin.createApi(apiDefinition({ name: 'steady', listenPath: '/steady/*', targets: [upstream.url] }));
    await gw.admin.waitForDataPlanes(created, gw.dps);
    const load = startLoad({ origin: gw.dp.proxyUrl, path: '/steady/x', concurrency: 8 });
    const cycles = 2;
    for (let cycle = 0; cycle < cycles; cycle++) {
      await delay(1_000);
      await gw.cp.kill();
      await delay(1_000);
      await gw.cp.restart();
      const admin = await createAdminClient(gw.cp);
      await pollUntil(async () => ((await admin.dataplanes()).body.some((dp: { id: string }) => dp.id === gw.dp.id) ? true : undefined), {
        what: `data plane ${gw.dp.id} to reconnect to the restarted CP`,
        details: () => `${gw.cp.recentLogs()}\n${gw.dp.recentLogs()}`,
      });
    }
    await delay(1_000);
    const result = await load.stop();
    console.log(
      `CP SIGKILL + restart ×${cycles} under constant load: ${result.sent} proxied requests in ${(result.elapsedMs / 1000).toFixed(1)} s, ${result.failed} failed`,
    );
    expect(result.failures).toEqual([]);
    expect(result.ok).toBe(result.sent);
    expect(result.sent).toBeGreaterThan(0);
    expect(await gw.stop()).toBe('');
  } finally {
    await gw.stop();
    await upstream.close();
  }
}, 60_000);
