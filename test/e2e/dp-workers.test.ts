/**
 * WORKERS=2 (docs/operations.md "Workers"): one data plane process whose primary forks two proxy workers on
 * the same PROXY_PORT. Which worker served a request is read from what the gateway documents:
 * the `worker` label of /metrics (aggregated by the primary) and the `worker` field of the access log.
 */
import { Agent, createServer, request as rawRequest } from 'node:http';
import { listen } from '#proto/listen';
import { createAdminClient, type AdminClient } from '../helpers/admin-client.js';
import { apiDefinition } from '../helpers/api-definition.js';
import { httpRequest } from '../helpers/http-request.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';
import { DATA_PLANE_SCRIPT, startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { spawnService } from '../helpers/service-process.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

interface WorkerState {
  worker: number;
  pid: number | null;
  version: number | null;
  hash: string | null;
}

let cp: ControlPlane;
let admin: AdminClient;
let dp: DataPlane;
let u: Upstream;
let slow: Upstream;

beforeAll(async () => {
  u = await startUpstream('workers');
  slow = await startUpstream('slow', { kind: 'delay', ms: 1_000 });
  cp = await startControlPlane();
  admin = await createAdminClient(cp);
  await admin.createApi(apiDefinition({ name: 'w', listenPath: '/w/*', targets: [u.url] }));
  const last = await admin.createApi(apiDefinition({ name: 'slow', listenPath: '/slow/*', targets: [slow.url] }));
  dp = await startDataPlane({ controlPlaneAddr: cp.grpcAddr, env: { WORKERS: '2', SHUTDOWN_TIMEOUT: '5s' } });
  await admin.waitForDataPlanes(last, [dp]);
}, 60_000);

afterAll(async () => {
  await dp?.kill();
  await cp?.dispose();
  await u?.close();
  await slow?.close();
});

/** `name{labels} value` lines of the primary's /metrics (of `of`), summed per `worker` label (only series matching `labels`). */
async function perWorker(name: string, labels: Record<string, string> = {}, of: DataPlane = dp): Promise<Record<string, number>> {
  const res = await httpRequest(`${of.statusUrl}/metrics`);
  expect(res.status).toBe(200);
  const counts: Record<string, number> = {};
  for (const line of res.text.split('\n')) {
    const m = /^(\w+)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const parsed = Object.fromEntries([...m[2]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
    if (!Object.entries(labels).every(([k, v]) => parsed[k] === v)) continue;
    counts[parsed.worker!] = (counts[parsed.worker!] ?? 0) + Number(m[3]);
  }
  return counts;
}

async function readyz(): Promise<{ status: number; body: { ready: boolean; version?: number; workers: WorkerState[] } }> {
  const res = await httpRequest(`${dp.statusUrl}/readyz`);
  return { status: res.status, body: res.json as { ready: boolean; version?: number; workers: WorkerState[] } };
}

/** The worker number the access log gives for a request id (the DP logs the line once the response is sent). */
function workerOf(requestId: string): number | undefined {
  const line = dp.process.lines().find((l) => l.json?.msg === 'access' && l.json.requestId === requestId);
  return line?.json?.worker as number | undefined;
}

/** A request on a kept-alive connection of `agent` (maxSockets 1: always the same connection while it lives). */
function viaAgent(agent: Agent, path: string, requestId: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = rawRequest({ host: '127.0.0.1', port: dp.proxyPort, path, agent, headers: { 'x-request-id': requestId } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', reject);
    });
    req.setTimeout(10_000, () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

test('requests on new connections are served by both workers: per-worker counts in /metrics, the worker in the access log', async () => {
  const before = await perWorker('gatehouse_proxy_requests_total', { route: 'api:w', status: '200' });
  const ids = Array.from({ length: 20 }, (_, i) => `spread-${i}`);
  const answers = await Promise.all(ids.map((id) => dp.request('GET', `/w/${id}`, { headers: { 'x-request-id': id } })));
  expect(answers.map((res) => res.status)).toEqual(Array(20).fill(200));

  const after = await perWorker('gatehouse_proxy_requests_total', { route: 'api:w', status: '200' });
  const served = { 1: (after['1'] ?? 0) - (before['1'] ?? 0), 2: (after['2'] ?? 0) - (before['2'] ?? 0) };
  expect(served[1] + served[2]).toBe(20);
  expect(served[1]).toBeGreaterThan(0);
  expect(served[2]).toBeGreaterThan(0);
  const logged = await pollUntil(async () => (ids.every((id) => workerOf(id) !== undefined) ? ids.map(workerOf) : undefined), {
    what: 'an access-log line for every request',
    details: () => dp.recentLogs(),
  });
  expect(new Set(logged)).toEqual(new Set([1, 2]));
  expect(logged.filter((w) => w === 1)).toHaveLength(served[1]);
});

test('an admin write reaches every worker: /readyz and GET /dataplanes show both on the new version, both route it', async () => {
  const write = await admin.createApi(apiDefinition({ name: 'fresh', listenPath: '/fresh/*', targets: [u.url] }));
  expect(write.status).toBe(201);
  const version = write.snapshotVersion!;
  await dp.waitForVersion(version);

  const ready = await readyz();
  expect(ready.status).toBe(200);
  expect(ready.body.workers.map((w) => [w.worker, w.version])).toEqual([
    [1, version],
    [2, version],
  ]);
  const listed = await pollUntil(
    async () => {
      const res = await admin.dataplanes();
      const mine = (res.body as Array<{ id: string; version: number | null }>).filter((entry) => entry.id.startsWith(`${dp.id}/`));
      return mine.length === 2 && mine.every((entry) => entry.version === version) ? mine : undefined;
    },
    { what: `both workers of ${dp.id} ACKing version ${version} in GET /dataplanes` },
  );
  expect(listed.map((entry) => entry.id).sort()).toEqual([`${dp.id}/w1`, `${dp.id}/w2`]);

  const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => dp.request('GET', `/fresh/${i}`)));
  expect(answers.map((res) => res.status)).toEqual(Array(10).fill(200));
  const routed = await perWorker('gatehouse_proxy_requests_total', { route: 'api:fresh', status: '200' });
  expect(routed['1']).toBeGreaterThan(0);
  expect(routed['2']).toBeGreaterThan(0);
});

test('SIGKILL of one worker: it is forked again and serves, the other keeps serving, no request fails', async () => {
  // A kept-alive connection: its worker is the survivor, the other one is killed.
  const pinned = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    expect(await viaAgent(pinned, '/w/pin', 'pin-0')).toBe(200);
    const survivor = await pollUntil(async () => workerOf('pin-0'), { what: 'the access-log line of pin-0' });
    const victim = survivor === 1 ? 2 : 1;
    const victimPid = (await readyz()).body.workers.find((w) => w.worker === victim)!.pid!;

    const failures: string[] = [];
    let pinnedServed = 0;
    let running = true;
    const pinnedLoop = (async () => {
      for (let i = 1; running; i++) {
        await viaAgent(pinned, `/w/pinned-${i}`, `pinned-${i}`).then(
          (status) => (status === 200 ? pinnedServed++ : failures.push(`pinned-${i}: ${status}`)),
          (err: Error) => failures.push(`pinned-${i}: ${err.message}`),
        );
      }
    })();

    process.kill(victimPid, 'SIGKILL');
    // New connections from the moment the primary knows: none may be handed to the dead worker.
    await pollUntil(
      async () => (dp.process.lines().some((l) => l.json?.msg === 'worker died, forking it again' && l.json.pid === victimPid) ? true : undefined),
      { what: `the primary to report worker ${victim} (pid ${victimPid}) dead`, details: () => dp.recentLogs() },
    );
    let fresh = 0;
    let replacementServed = false;
    while (!replacementServed) {
      const id = `fresh-${fresh++}`;
      const res = await dp.request('GET', `/w/${id}`, { headers: { 'x-request-id': id } }).catch((err: Error) => err);
      if (res instanceof Error || res.status !== 200) failures.push(`${id}: ${res instanceof Error ? res.message : res.status}`);
      else replacementServed = (await pollUntil(async () => workerOf(id), { what: `the access-log line of ${id}` })) === victim;
      if (fresh > 500) throw new Error(`worker ${victim} never served again\n${dp.recentLogs()}`);
    }
    running = false;
    await pinnedLoop;

    expect(failures).toEqual([]);
    expect(pinnedServed).toBeGreaterThan(0);
    const ready = await readyz();
    expect(ready.status).toBe(200);
    const replacement = ready.body.workers.find((w) => w.worker === victim)!;
    expect(replacement.pid).not.toBe(victimPid);
    expect(replacement.version).toBe(ready.body.version);
    expect(await perWorker('gatehouse_dataplane_worker_restarts_total')).toEqual({ [String(victim)]: 1 });
  } finally {
    pinned.destroy();
  }
});

test('SIGTERM to the primary drains the requests in flight in every worker, then exits 0', async () => {
  // A data plane of its own to stop: the shared one serves the tests that run after this one.
  const draining = await startDataPlane({ controlPlaneAddr: cp.grpcAddr, env: { WORKERS: '2', SHUTDOWN_TIMEOUT: '5s' } });
  try {
    const inFlight = Array.from({ length: 10 }, (_, i) => draining.request('GET', `/slow/${i}`));
    await slow.waitForRequests(10);
    const busy = await perWorker('gatehouse_proxy_in_flight_requests', {}, draining);
    expect(busy['1']).toBeGreaterThan(0);
    expect(busy['2']).toBeGreaterThan(0);

    const exited = draining.stop();
    const answers = await Promise.all(inFlight);
    expect(answers.map((res) => res.status)).toEqual(Array(10).fill(200));
    expect(await exited).toEqual({ code: 0, signal: null });
    const stopped = draining.process
      .lines()
      .flatMap((l) => (l.json?.msg === 'stopped' && l.json.worker !== undefined ? [[l.json.worker, l.json.drained]] : []));
    expect(stopped.sort()).toEqual([
      [1, true],
      [2, true],
    ]);
  } finally {
    await draining.kill();
  }
});

test('a proxy port in use stops the whole data plane with exit 1: the worker says why, the primary that it stops', async () => {
  const taken = createServer();
  const port = await listen(taken, 0, '127.0.0.1');
  try {
    const proc = await spawnService({
      name: 'data-plane (port taken)',
      script: DATA_PLANE_SCRIPT,
      env: { WORKERS: '2', PROXY_HOST: '127.0.0.1', PROXY_PORT: String(port), STATUS_HOST: '127.0.0.1', STATUS_PORT: '0', CONTROL_PLANE_ADDR: cp.grpcAddr },
      listeners: [],
    });
    expect(await proc.exited).toEqual({ code: 1, signal: null });
    const fatal = proc.lines().flatMap((l) => (l.json?.level === 60 ? [l.json.msg] : []));
    expect(fatal).toContain(`PROXY_PORT ${port} is already in use on 127.0.0.1`);
    expect(fatal.at(-1)).toBe('a worker exited before the data plane could serve; stopping');
  } finally {
    await new Promise((resolve) => taken.close(resolve));
  }
});
