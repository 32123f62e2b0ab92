/**
 * Control plane ↔ data planes as processes (docs/operations.md "Control plane ↔ data plane"): two DPs converge on one snapshot version,
 * GET /dataplanes reports them, a killed CP leaves the DPs serving, a CP restarted on the same
 * ports and DATA_DIR is rejoined without restarting the DPs, and definitions survive the restart.
 * Also SNAPSHOT_CACHE at cold start (served only while no CP answers), and a DP that never reached a CP answering 503.
 */
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { apiDefinition } from '../helpers/api-definition.js';
import { httpRequest } from '../helpers/http-request.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { TEST_JOIN_TOKEN } from '../helpers/start-control-plane.js';
import { freePort } from '../helpers/free-port.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

interface DataPlaneRow {
  id: string;
  hostname: string;
  address: string;
  proxy_address: string;
  connected_since: string;
  version: number;
  hash: string;
  last_ack: { version: number; at: string } | null;
  last_nack: { version: number; error: string; at: string } | null;
}

let gw: Gateway;
let u: Upstream;

async function expectRouted(dp: DataPlane, path: string): Promise<void> {
  const res = await dp.request('GET', path);
  expect({ dp: dp.id, path, status: res.status }).toEqual({ dp: dp.id, path, status: 200 });
}

/** GET /dataplanes until its rows satisfy `ok` (the list is eventually consistent); returns them. */
function listingWhere(what: string, ok: (rows: DataPlaneRow[]) => boolean): Promise<DataPlaneRow[]> {
  return pollUntil(
    async () => {
      const res = await gw.admin.dataplanes();
      if (res.status !== 200 || !Array.isArray(res.body)) return undefined;
      const rows = res.body as DataPlaneRow[];
      return ok(rows) ? rows : undefined;
    },
    { what: `GET /dataplanes to list ${what}`, details: () => gw.cp.recentLogs() },
  );
}

/** GET /dataplanes until every given DP is listed at >= version. */
function waitForListing(dps: DataPlane[], version: number): Promise<DataPlaneRow[]> {
  return listingWhere(`${dps.map((d) => d.id).join(', ')} at version >= ${version}`, (rows) =>
    dps.every((dp) => rows.some((row) => row.id === dp.id && row.version >= version && row.last_ack !== null)),
  );
}

/**
 * Waits until GET /dataplanes lists exactly the shared data planes, each having ACKed the CP's
 * current version, and returns that version. Tests run in any order, and the one before may have
 * written without waiting for both shared DPs, stopped a DP of its own a moment ago or brought the
 * CP back while the DPs were still reconnecting.
 */
async function settled(): Promise<number> {
  const version = (await gw.admin.readyz()).body.snapshot.version as number;
  await gw.admin.waitForDataPlanes(version, gw.dps);
  await listingWhere(
    `exactly ${gw.dps.map((d) => d.id).join(', ')}, each ACKed at version ${version}`,
    (rows) => rows.length === gw.dps.length && gw.dps.every((dp) => rows.some((row) => row.id === dp.id && row.last_ack?.version === version)),
  );
  return version;
}

beforeAll(async () => {
  u = await startUpstream('sync');
  gw = await startGateway({ dataPlanes: 2 });
});

afterAll(async () => {
  const problems = await gw?.stop();
  await u?.close();
  expect(problems ?? '').toBe('');
});

test('both data planes converge on the same snapshot version and hash', async () => {
  const created = await gw.admin.createApi(apiDefinition({ name: 'first', listenPath: '/first/*', targets: [u.url] }));
  expect(created.status).toBe(201);
  const version = await gw.admin.waitForDataPlanes(created, gw.dps);
  const states = await Promise.all(gw.dps.map((dp) => dp.readyz()));
  expect(states.map((s) => s.version)).toEqual([version, version]);
  expect(states[0].hash).toBeTruthy();
  expect(states[1].hash).toBe(states[0].hash);
  const cpReady = await gw.admin.readyz();
  expect(cpReady.status).toBe(200);
  expect(cpReady.body).toMatchObject({ ready: true, snapshot: { version, hash: states[0].hash } });
  for (const dp of gw.dps) await expectRouted(dp, '/first/a');
  const metrics = await httpRequest(`${gw.dp.statusUrl}/metrics`);
  expect(metrics.status).toBe(200);
  expect(metrics.headers['content-type']).toMatch(/^text\/plain/);
});

test('GET /dataplanes lists both with their version and last ACK', async () => {
  const version = await settled();
  const rows = await waitForListing(gw.dps, version);
  for (const dp of gw.dps) {
    const row = rows.find((r) => r.id === dp.id)!;
    expect(row).toMatchObject({ id: dp.id, version, last_nack: null });
    expect(row.last_ack?.version).toBe(version);
    expect(Number.isNaN(Date.parse(row.last_ack!.at))).toBe(false);
    expect(Number.isNaN(Date.parse(row.connected_since))).toBe(false);
    expect(typeof row.hostname).toBe('string');
    expect(row.proxy_address).toContain(String(dp.proxyPort));
  }
});

/** The CP's count of snapshots pushed to data planes (pushes are queued before a write's response), whole ones and deltas. */
async function pushesByContent(): Promise<{ snapshot: number; delta: number }> {
  const metrics = await gw.admin.request('GET', '/metrics');
  const count = (content: string) => {
    const line = metrics.text.split('\n').find((l) => l.startsWith(`gatehouse_snapshot_pushes_total{content="${content}"} `));
    expect(line).toBeDefined();
    return Number(line!.split(' ')[1]);
  };
  return { snapshot: count('snapshot'), delta: count('delta') };
}

async function pushesSent(): Promise<number> {
  const { snapshot, delta } = await pushesByContent();
  return snapshot + delta;
}

test('an unchanged store pushes nothing: a no-op write keeps the version and sends no push', async () => {
  const created = await gw.admin.createApi(apiDefinition({ name: 'unchanged', listenPath: '/unchanged/*', targets: [u.url] }));
  expect(created.status).toBe(201);
  // A real change is pushed once per connected DP: only the two shared ones may be connected.
  await settled();
  const before = (await gw.admin.readyz()).body.snapshot.version;
  const pushesBefore = await pushesSent();
  const same = await gw.admin.updateApi('unchanged', { active: true });
  expect(same.status).toBe(200);
  const after = (await gw.admin.readyz()).body.snapshot.version;
  expect(after).toBe(before);
  expect(await pushesSent()).toBe(pushesBefore);
  // The counter does move on a real change, so the equality above is not vacuous.
  const changed = await gw.admin.updateApi('unchanged', { proxy: { preserve_host: true } });
  await gw.admin.waitForDataPlanes(changed, gw.dps);
  expect(await pushesSent()).toBe(pushesBefore + gw.dps.length);
  await gw.admin.waitForDataPlanes(await gw.admin.updateApi('unchanged', { proxy: { preserve_host: false } }), gw.dps);
});

describe('the shared CP taken down', () => {
  // Whichever test took it down, the next one (in any order) finds the CP up with both DPs rejoined.
  afterEach(async () => {
    if (!gw.cp.process.running()) {
      await gw.cp.restart();
      await gw.admin.login();
    }
    await settled();
  });

  test('CP killed (SIGKILL): both data planes keep serving their last snapshot', async () => {
    const created = await gw.admin.createApi(apiDefinition({ name: 'while-cp-down', listenPath: '/while-cp-down/*', targets: [u.url] }));
    expect(created.status).toBe(201);
    const versionBeforeKill = await settled();
    await gw.cp.kill();
    for (const dp of gw.dps) {
      await expectRouted(dp, '/while-cp-down/b');
      const state = await dp.readyz();
      expect(state).toMatchObject({ status: 200, ready: true, version: versionBeforeKill });
    }
    // "Indefinitely": still serving after several failed reconnect attempts (backoff max is 1 s here).
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    for (const dp of gw.dps) {
      await expectRouted(dp, '/while-cp-down/b');
      expect(await dp.readyz()).toMatchObject({ status: 200, ready: true, version: versionBeforeKill });
    }
  });

  test('CP restarted on the same ports and DATA_DIR: definitions survived, DPs resync without restart', async () => {
    const kept = await gw.admin.createApi(apiDefinition({ name: 'survivor', listenPath: '/survivor/*', targets: [u.url] }));
    expect(kept.status).toBe(201);
    const versionBeforeRestart = await settled();
    const namesBefore = ((await gw.admin.listApis()).body as Array<{ name: string }>).map((api) => api.name);
    expect(namesBefore).toContain('survivor');
    // SIGKILL, not SIGTERM: the definitions must already be on disk, not flushed by a graceful shutdown.
    await gw.cp.kill();
    await gw.cp.restart();
    await gw.admin.login();
    const listed = await gw.admin.listApis();
    expect(listed.status).toBe(200);
    expect(listed.body.map((api: { name: string }) => api.name)).toEqual(namesBefore);
    const ready = await gw.admin.readyz();
    expect(ready.body.snapshot.version).toBe(versionBeforeRestart);

    await waitForListing(gw.dps, versionBeforeRestart);
    // They hold what the restarted CP serves: each was sent an empty delta (a few bytes), not the whole again.
    expect(await pushesByContent()).toEqual({ snapshot: 0, delta: gw.dps.length });
    const created = await gw.admin.createApi(apiDefinition({ name: 'after-restart', listenPath: '/after-restart/*', targets: [u.url] }));
    expect(created.status).toBe(201);
    expect(created.snapshotVersion).toBeGreaterThan(versionBeforeRestart);
    await gw.admin.waitForDataPlanes(created, gw.dps);
    for (const dp of gw.dps) {
      await expectRouted(dp, '/after-restart/a');
      await expectRouted(dp, '/survivor/c');
    }
  });
});

test('a stopped data plane leaves GET /dataplanes; it exits 0 on SIGTERM', async () => {
  // A DP of its own: the shared two stay up for the tests that count or list them.
  const leaving = await startDataPlane({ controlPlaneAddr: gw.cp.grpcAddr });
  try {
    // Listed first, so that its disappearing below is the stop's doing.
    await waitForListing([leaving], (await leaving.readyz()).version!);
    const status = await leaving.stop();
    expect(status.code).toBe(0);
    await listingWhere(`${gw.dp.id} without ${leaving.id}`, (rows) => {
      const ids = rows.map((row) => row.id);
      return !ids.includes(leaving.id) && ids.includes(gw.dp.id);
    });
  } finally {
    if (leaving.process.running()) await leaving.kill();
  }
});

test('SNAPSHOT_CACHE: a data plane cold-started with no reachable CP serves the cached snapshot', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-cache-'));
  const env = { SNAPSHOT_CACHE: join(dir, 'snapshot.bin') };
  try {
    const created = await gw.admin.createApi(apiDefinition({ name: 'cold-cache', listenPath: '/cold-cache/*', targets: [u.url] }));
    expect(created.status).toBe(201);
    const version = created.snapshotVersion!;
    const first = await startDataPlane({ controlPlaneAddr: gw.cp.grpcAddr, env });
    try {
      await first.waitForVersion(version);
      expect((await first.stop()).code).toBe(0);
    } finally {
      if (first.process.running()) await first.kill();
    }
    const written = await stat(env.SNAPSHOT_CACHE).then(
      (file) => `cache file written, ${file.size} bytes`,
      (err: Error) => `no cache file after a graceful stop: ${err.message}\n${first.recentLogs()}`,
    );
    expect(written).toMatch(/^cache file written/);

    const orphan = await startDataPlane({ controlPlaneAddr: `127.0.0.1:${await freePort()}`, env });
    try {
      expect(await orphan.readyz()).toMatchObject({ status: 200, version });
      await expectRouted(orphan, '/cold-cache/b');
    } finally {
      expect((await orphan.stop()).code).toBe(0);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("SNAPSHOT_CACHE with the CP reachable: a restarted data plane serves the CP's configuration, never its older cache", async () => {
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-cache-'));
  const env = { SNAPSHOT_CACHE: join(dir, 'snapshot.bin') };
  try {
    const created = await gw.admin.createApi(apiDefinition({ name: 'cached-only', listenPath: '/cached-only/*', targets: [u.url] }));
    expect(created.status).toBe(201);
    const first = await startDataPlane({ controlPlaneAddr: gw.cp.grpcAddr, env });
    try {
      await gw.admin.waitForDataPlanes(created, [first]);
      expect((await first.stop()).code).toBe(0);
    } finally {
      if (first.process.running()) await first.kill();
    }
    // The cache still routes /cached-only/*; the CP no longer does (a write answers once its snapshot is built).
    expect((await gw.admin.deleteApi('cached-only')).status).toBe(204);

    const restarted = await startDataPlane({ controlPlaneAddr: gw.cp.grpcAddr, env, waitForSnapshot: false });
    try {
      // From its first request on: 503 (nothing yet) or 404 (the CP's snapshot), never the cached route.
      const seen = new Set<number>();
      await pollUntil(
        async () => {
          seen.add((await restarted.request('GET', '/cached-only/x')).status);
          return seen.has(404) ? true : undefined;
        },
        { what: "the restarted DP to apply the CP's snapshot", intervalMs: 5 },
      );
      expect([...seen].filter((status) => status !== 503 && status !== 404)).toEqual([]);
      expect(restarted.process.lines().filter((line) => line.raw.includes('serving cached snapshot'))).toEqual([]);
    } finally {
      expect((await restarted.stop()).code).toBe(0);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a data plane with no reachable CP is alive but not ready, /readyz says why, and it answers 503 "no configuration loaded"', async () => {
  const port = await freePort();
  const dp = await startDataPlane({ controlPlaneAddr: `127.0.0.1:${port}`, waitForSnapshot: false });
  try {
    const ready = await dp.readyz();
    expect(ready.status).toBe(503);
    expect(ready.ready).toBe(false);
    // The address and the last attempt's error, once one has failed.
    const readyz = await pollUntil(
      async () => {
        const res = await httpRequest(`${dp.statusUrl}/readyz`);
        return (res.json as { reason?: string }).reason?.includes('unreachable') ? res : undefined;
      },
      { what: '/readyz naming the unreachable control plane', timeoutMs: 10_000 },
    );
    expect(readyz.status).toBe(503);
    expect(readyz.json).toEqual({
      ready: false,
      reason: expect.stringMatching(new RegExp(`^no snapshot yet: control plane 127\\.0\\.0\\.1:${port} unreachable \\(.*ECONNREFUSED`)),
    });
    expect(readyz.text).not.toContain(TEST_JOIN_TOKEN);
    const health = await httpRequest(`${dp.statusUrl}/healthz`);
    expect(health.status).toBe(200);
    expect(health.json).toEqual({ status: 'ok' });
    const res = await dp.request('GET', '/first/a');
    expect(res.status).toBe(503);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.text).toBe('"no configuration loaded"');
  } finally {
    expect((await dp.stop()).code).toBe(0);
  }
});

test('a data plane whose join token the CP refuses: /readyz says so, without the token', async () => {
  const wrongToken = 'a-wrong-join-token-0123456789abcdef';
  const dp = await startDataPlane({ controlPlaneAddr: gw.cp.grpcAddr, env: { GRPC_JOIN_TOKEN: wrongToken }, waitForSnapshot: false });
  try {
    const readyz = await pollUntil(
      async () => {
        const res = await httpRequest(`${dp.statusUrl}/readyz`);
        return (res.json as { reason?: string }).reason?.includes('refused') ? res : undefined;
      },
      { what: '/readyz naming the refusal', timeoutMs: 10_000 },
    );
    expect(readyz.status).toBe(503);
    expect((readyz.json as { reason: string }).reason).toMatch(
      new RegExp(`^no snapshot yet: control plane ${gw.cp.grpcAddr.replaceAll('.', '\\.')} refused authentication \\(`),
    );
    expect(readyz.text).not.toContain(wrongToken);
    expect(readyz.text).not.toContain(TEST_JOIN_TOKEN);
  } finally {
    expect((await dp.stop()).code).toBe(0);
  }
});
