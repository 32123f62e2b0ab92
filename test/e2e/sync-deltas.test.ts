/**
 * Deltas on the wire between real processes (docs/operations.md "Control plane ↔ data plane"): after the full
 * snapshot on connect, each write reaches the data planes as a SnapshotDelta; a data plane that was
 * away (and so missed versions) gets the full snapshot again, and serving ones that hold a version a restarted CP
 * never built get it too, applied in turns; both end on the CP's hash and route
 * by what the writes said. (A delta that does not hash right is refused: data-plane/src/sync
 * snapshot-client.test.ts, against a control plane reduced to the wire.)
 */
import { createLogger } from '#proto/logger';
import { parseApiDefinition } from '#proto/definition/index';
import { openFileStore } from '../../control-plane/src/store/file-store.js';
import { apiDefinition } from '../helpers/api-definition.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let u: Upstream;

/** The `content` of every "snapshot applied" line of a data plane, with its version, once the line for `upTo` is in (logs trail /readyz). */
async function applied(dp: DataPlane, upTo: number, withTurns = false): Promise<Array<{ version: number; content: string; inTurns?: boolean }>> {
  const lines = () =>
    dp.process
      .lines()
      .flatMap((l) =>
        l.json?.msg === 'snapshot applied'
          ? [{ version: Number(l.json.version), content: String(l.json.content), ...(withTurns ? { inTurns: l.json.inTurns === true } : {}) }]
          : [],
      );
  await pollUntil(async () => (lines().some((l) => l.version >= upTo) ? true : undefined), {
    what: `${dp.id} to log applying version ${upTo}`,
    details: () => dp.recentLogs(),
  });
  return lines();
}

async function sameHashAsControlPlane(dps: DataPlane[]): Promise<string> {
  const cp = (await gw.admin.readyz()).body.snapshot as { version: number; hash: string };
  await pollUntil(async () => ((await Promise.all(dps.map((dp) => dp.readyz()))).every((s) => s.hash === cp.hash) ? true : undefined), {
    what: `every data plane at hash ${cp.hash}`,
  });
  return cp.hash;
}

beforeAll(async () => {
  u = await startUpstream('deltas');
  gw = await startGateway({ dataPlanes: 2 });
});

afterAll(async () => {
  const problems = await gw?.stop();
  await u?.close();
  expect(problems ?? '').toBe('');
});

test('writes after the first snapshot reach both data planes as deltas; they end on the CP hash and route by them', async () => {
  const created = await gw.admin.createApi(apiDefinition({ name: 'd1', listenPath: '/d1/*', targets: [u.url] }));
  expect(created.status).toBe(201);
  const v1 = await gw.admin.waitForDataPlanes(created, gw.dps);
  const updated = await gw.admin.updateApi('d1', { proxy: { listen_path: '/d1-moved/*' } });
  expect(updated.status).toBe(200);
  const v2 = await gw.admin.waitForDataPlanes(updated, gw.dps);
  const deleted = await gw.admin.request('DELETE', '/apis/d1');
  expect(deleted.status).toBe(204);
  const v3 = await gw.admin.waitForDataPlanes(deleted, gw.dps);
  for (const dp of gw.dps) {
    expect((await applied(dp, v3)).filter((a) => a.version >= v1)).toEqual([
      { version: v1, content: 'delta' },
      { version: v2, content: 'delta' },
      { version: v3, content: 'delta' },
    ]);
    expect((await dp.request('GET', '/d1-moved/x')).status).toBe(404);
  }
  await sameHashAsControlPlane(gw.dps);
});

test('a CP restarted on a configuration changed while it was down sends the serving DPs the whole, which they apply in turns', async () => {
  const before = await gw.admin.createApi(apiDefinition({ name: 'd4', listenPath: '/d4/*', targets: [u.url] }));
  expect(before.status).toBe(201);
  await gw.admin.waitForDataPlanes(before, gw.dps);
  await gw.cp.kill();
  // Changed behind the CP's back (as another replica's or an operator's write): the DPs' version is then one it never built.
  const store = await openFileStore({ dataDir: gw.cp.dataDir, logger: createLogger('control-plane', 'silent') });
  await store.update((defs) => ({ ...defs, apis: [...defs.apis, parseApiDefinition(apiDefinition({ name: 'd5', listenPath: '/d5/*', targets: [u.url] }))] }));
  const { revision } = store.current();
  await store.close();
  await gw.cp.restart();
  await gw.admin.login();
  await sameHashAsControlPlane(gw.dps);
  for (const dp of gw.dps) {
    expect((await applied(dp, revision, true)).at(-1)).toEqual({ version: revision, content: 'snapshot', inTurns: true });
    expect((await dp.request('GET', '/d5/x')).status).toBe(200);
    expect((await dp.request('GET', '/d4/x')).status).toBe(200);
  }
  const metrics = (await gw.admin.request('GET', '/metrics')).text;
  expect(metrics).toContain(`gatehouse_snapshot_pushes_total{content="snapshot"} ${gw.dps.length}`);
});

test('a data plane that missed versions while away gets the full snapshot, then deltas again', async () => {
  // A DP of its own goes away: the shared two stay connected, so the other test sees deltas on both.
  const away = await startDataPlane({ controlPlaneAddr: gw.cp.grpcAddr });
  const id = away.id;
  let back: DataPlane | undefined;
  try {
    await away.stop();
    const missed = await gw.admin.createApi(apiDefinition({ name: 'd2', listenPath: '/d2/*', targets: [u.url] }));
    expect(missed.status).toBe(201);
    await gw.admin.waitForDataPlanes(missed, gw.dps);
    back = await startDataPlane({ controlPlaneAddr: gw.cp.grpcAddr, id });
    const version = missed.snapshotVersion!;
    await back.waitForVersion(version);
    expect(await applied(back, version)).toEqual([{ version, content: 'snapshot' }]);
    expect((await back.request('GET', '/d2/x')).status).toBe(200);

    const next = await gw.admin.createApi(apiDefinition({ name: 'd3', listenPath: '/d3/*', targets: [u.url] }));
    expect(next.status).toBe(201);
    const v = await gw.admin.waitForDataPlanes(next, [...gw.dps, back]);
    expect((await applied(back, v)).at(-1)).toEqual({ version: v, content: 'delta' });
    await sameHashAsControlPlane([...gw.dps, back]);
    expect((await back.request('GET', '/d3/x')).status).toBe(200);
  } finally {
    if (away.process.running()) await away.kill();
    if (back) await back.stop();
  }
});
