/**
 * Deltas on the wire between real processes (README "Control plane ↔ data plane"): after the full
 * snapshot on connect, each write reaches the data planes as a SnapshotDelta; a data plane that was
 * away (and so missed versions) gets the full snapshot again; both end on the CP's hash and route
 * by what the writes said. (A delta that does not hash right is refused: data-plane/src/sync
 * snapshot-client.test.ts, against a control plane reduced to the wire.)
 */
import { apiDefinition } from '../helpers/api-definition.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let u: Upstream;

/** The `content` of every "snapshot applied" line of a data plane, with its version, once the line for `upTo` is in (logs trail /readyz). */
async function applied(dp: DataPlane, upTo: number): Promise<Array<{ version: number; content: string }>> {
  const lines = () =>
    dp.process.lines().flatMap((l) => (l.json?.msg === 'snapshot applied' ? [{ version: Number(l.json.version), content: String(l.json.content) }] : []));
  await pollUntil(async () => (lines().some((l) => l.version >= upTo) ? true : undefined), { what: `${dp.id} to log applying version ${upTo}`, details: () => dp.recentLogs() });
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
