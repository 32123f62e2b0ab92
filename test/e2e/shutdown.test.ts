/**
 * Graceful shutdown of both services (SPEC §1): on SIGTERM a data plane stops accepting,
 * finishes the request in flight, and both services exit with code 0.
 */
import { apiDefinition } from '../helpers/api-definition.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let u: Upstream;

beforeAll(async () => {
  u = await startUpstream('shutdown', { kind: 'delay', ms: 1_000 });
  gw = await startGateway();
  const created = await gw.admin.createApi(apiDefinition({ name: 'slow', listenPath: '/slow/*', targets: [u.url] }));
  expect(created.status).toBe(201);
  await gw.admin.waitForDataPlanes(created, gw.dps);
});

afterAll(async () => {
  await gw?.stop();
  await u?.close();
});

test('data plane: SIGTERM finishes the in-flight request, refuses new ones, exits 0', async () => {
  const inFlight = gw.dp.request('GET', '/slow/a');
  await u.waitForRequests(1);
  const exited = gw.dp.stop();
  const res = await inFlight;
  expect(res.status).toBe(200);
  expect(res.json).toMatchObject({ upstream: 'shutdown', url: '/slow/a' });
  expect((await exited).code).toBe(0);
  await expect(gw.dp.request('GET', '/slow/b', { timeoutMs: 2_000 })).rejects.toThrow(/ECONNREFUSED/);
});

test('control plane: SIGTERM exits 0', async () => {
  const status = await gw.cp.stop();
  expect(status).toEqual({ code: 0, signal: null });
});
