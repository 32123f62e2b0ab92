/**
 * Graceful shutdown of both services (docs/configuration.md "Configuration"): on SIGTERM a data plane stops accepting,
 * finishes every request in flight within SHUTDOWN_TIMEOUT (the figure is printed),
 * and both services exit with code 0.
 */
import { apiDefinition } from '../helpers/api-definition.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

/** The data plane's drain bound (start-data-plane sets SHUTDOWN_TIMEOUT=5s; stated here so the claim is explicit). */
const SHUTDOWN_TIMEOUT_MS = 5_000;

let gw: Gateway;
let u: Upstream;

beforeAll(async () => {
  u = await startUpstream('shutdown', { kind: 'delay', ms: 1_000 });
  gw = await startGateway({ dataPlaneEnv: { SHUTDOWN_TIMEOUT: `${SHUTDOWN_TIMEOUT_MS}ms` } });
  const created = await gw.admin.createApi(apiDefinition({ name: 'slow', listenPath: '/slow/*', targets: [u.url] }));
  expect(created.status).toBe(201);
  await gw.admin.waitForDataPlanes(created, gw.dps);
});

afterAll(async () => {
  await gw?.stop();
  await u?.close();
});

test('data plane: SIGTERM finishes every in-flight slow request within SHUTDOWN_TIMEOUT, refuses new ones, exits 0', async () => {
  const IN_FLIGHT = 50;
  const inFlight = Array.from({ length: IN_FLIGHT }, (_, i) => gw.dp.request('GET', `/slow/${i}`));
  await u.waitForRequests(IN_FLIGHT);
  const signalledAt = performance.now();
  const exited = gw.dp.stop().then((status) => ({ status, ms: performance.now() - signalledAt }));
  const answers = await Promise.all(inFlight);
  expect(answers.map((res) => res.status)).toEqual(Array(IN_FLIGHT).fill(200));
  expect(answers.map((res) => res.json)).toEqual(
    Array.from({ length: IN_FLIGHT }, (_, i) => expect.objectContaining({ upstream: 'shutdown', url: `/slow/${i}` })),
  );
  const { status, ms } = await exited;
  expect(status.code).toBe(0);
  console.log(
    `DP SIGTERM with ${IN_FLIGHT} in-flight 1 s requests: ${IN_FLIGHT}/${IN_FLIGHT} completed, exit 0 after ${Math.round(ms)} ms (SHUTDOWN_TIMEOUT ${SHUTDOWN_TIMEOUT_MS} ms)`,
  );
  expect(ms).toBeLessThan(SHUTDOWN_TIMEOUT_MS);
  await expect(gw.dp.request('GET', '/slow/b', { timeoutMs: 2_000 })).rejects.toThrow(/ECONNREFUSED/);
});

test('control plane: SIGTERM exits 0', async () => {
  const status = await gw.cp.stop();
  expect(status).toEqual({ code: 0, signal: null });
});
