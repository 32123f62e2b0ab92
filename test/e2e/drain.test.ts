/**
 * The data plane's drain with SHUTDOWN_DELAY (docs/operations.md "Drain"): after SIGTERM it still accepts and
 * serves for the delay, each answer with `Connection: close`, so keep-alive clients sending continuously, and one
 * whose kept-alive connection sat idle at the signal, lose no request; /readyz answers 503 meanwhile; then it
 * drains and exits 0. An h2c connection gets GOAWAY at the signal, and one opened during the delay is served.
 */
import { constants } from 'node:http2';
import { Client } from 'undici';
import { apiDefinition } from '../helpers/api-definition.js';
import { h2Request, h2Session } from '../helpers/h2-client.js';
import { startDataPlane } from '../helpers/start-data-plane.js';
import { startLoad, stopAllLoads } from '../helpers/load-generator.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

// A test that fails while its load runs must not leave the load running into the next ones.
afterEach(stopAllLoads);

const SHUTDOWN_DELAY_MS = 3_000;

let gw: Gateway;
let u: Upstream;

beforeAll(async () => {
  u = await startUpstream('drain');
  gw = await startGateway({ dataPlaneEnv: { SHUTDOWN_DELAY: `${SHUTDOWN_DELAY_MS}ms` } });
  const created = await gw.admin.createApi(apiDefinition({ name: 'drain', listenPath: '/drain/*', targets: [u.url] }));
  expect(created.status).toBe(201);
  await gw.admin.waitForDataPlanes(created, gw.dps);
});

afterAll(async () => {
  await gw?.stop();
  await u?.close();
});

test('SIGTERM: keep-alive clients sending across it fail no request; answers close their connections; exit 0 after the delay', async () => {
  // One kept-alive connection that is idle when the signal comes, and 8 that send without a pause.
  const idle = new Client(gw.dp.proxyUrl, { keepAliveTimeout: 30_000 });
  const first = await idle.request({ method: 'GET', path: '/drain/idle-1' });
  await first.body.text();
  expect(first.headers.connection).not.toBe('close');
  const load = startLoad({ origin: gw.dp.proxyUrl, path: '/drain/load', concurrency: 8 });
  await new Promise((r) => setTimeout(r, 500));

  const signalledAt = performance.now();
  const exited = gw.dp.stop().then((status) => ({ status, ms: performance.now() - signalledAt }));
  await new Promise((r) => setTimeout(r, 300));
  // The idle connection's next request is answered, and told to close.
  const second = await idle.request({ method: 'GET', path: '/drain/idle-2' });
  expect({ status: second.statusCode, connection: second.headers.connection }).toEqual({ status: 200, connection: 'close' });
  await second.body.text();
  expect((await gw.dp.readyz()).status).toBe(503);
  // Load goes on for most of the delay (the reconnects land on the listener that still accepts).
  await new Promise((r) => setTimeout(r, SHUTDOWN_DELAY_MS - 1_500));
  const result = await load.stop();
  await idle.close();
  console.log(`DP SIGTERM under keep-alive load (SHUTDOWN_DELAY ${SHUTDOWN_DELAY_MS} ms): ${result.ok} answered, ${result.failed} failed`);
  expect({ failed: result.failed, failures: result.failures }).toEqual({ failed: 0, failures: [] });
  expect(result.ok).toBeGreaterThan(50);

  const { status, ms } = await exited;
  expect(status.code).toBe(0);
  expect(ms).toBeGreaterThanOrEqual(SHUTDOWN_DELAY_MS);
  await expect(gw.dp.request('GET', '/drain/after', { timeoutMs: 2_000 })).rejects.toThrow(/ECONNREFUSED/);
});

test('SIGTERM: an h2c connection gets GOAWAY at once; one opened during the delay is served, then gets GOAWAY', async () => {
  const own = await startDataPlane({ controlPlaneAddr: gw.cp.grpcAddr, env: { SHUTDOWN_DELAY: `${SHUTDOWN_DELAY_MS}ms` } });
  const before = await h2Session(`http://127.0.0.1:${own.proxyPort}`);
  try {
    expect((await h2Request(before, { ':path': '/drain/h2-before', ':method': 'GET' })).status).toBe(200);
    const goaway = new Promise<number>((resolve) => before.once('goaway', (code) => resolve(code)));
    const signalledAt = performance.now();
    const exited = own.stop().then((status) => ({ status, ms: performance.now() - signalledAt }));
    expect(await goaway).toBe(constants.NGHTTP2_NO_ERROR);
    expect(performance.now() - signalledAt).toBeLessThan(SHUTDOWN_DELAY_MS);

    const during = await h2Session(`http://127.0.0.1:${own.proxyPort}`);
    const goawayDuring = new Promise<number>((resolve) => during.once('goaway', (code) => resolve(code)));
    const answer = await h2Request(during, { ':path': '/drain/h2-during', ':method': 'GET' });
    expect(answer.status).toBe(200);
    expect(await goawayDuring).toBe(constants.NGHTTP2_NO_ERROR);
    during.destroy();
    const { status, ms } = await exited;
    expect(status.code).toBe(0);
    expect(ms).toBeGreaterThanOrEqual(SHUTDOWN_DELAY_MS);
  } finally {
    before.destroy();
    if (own.process.running()) await own.kill();
  }
});
