/**
 * A proxied request must not outlive itself in the data plane's heap. Under sustained load, what the
 * young generation's collections (scavenges) promote to the old generation per request stays a small
 * part of what a request allocates (~16 KB): only requests in flight across two scavenges get promoted.
 * An object literal with a getter closing over the exchange, made per request, keeps every request alive
 * past its end at no visible cost in any other test: this test catches that kind (kilobytes promoted per
 * request). Smaller retentions (a per-request undici header timeout differing from the body timeout, access
 * lines through pino's asynchronous destination) are below its bound; scripts/gc-per-request.sh shows them
 * (docs/benchmarks.md). Not a timing: V8 counts the bytes (`--trace-gc-nvp`, each scavenge's `promoted=`).
 */
import { createAdminClient, type AdminClient } from '../helpers/admin-client.js';
import { apiDefinition } from '../helpers/api-definition.js';
import { startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';
import { startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';
import { loadThrough } from '../helpers/proxy-load.js';

/** Three times a healthy DP's figure here, far below a retained exchange. */
const MAX_PROMOTED_PER_REQUEST = 400;
const REQUESTS = 8_000;
const CONCURRENCY = 16;

let cp: ControlPlane;
let admin: AdminClient;
let dp: DataPlane;
let u: Upstream;
/** Milliseconds since the DP started and bytes promoted, of each scavenge --trace-gc-nvp reported. */
const scavenges: { at: number; promoted: number }[] = [];

beforeAll(async () => {
  u = await startUpstream('retention');
  cp = await startControlPlane();
  admin = await createAdminClient(cp);
  await admin.createApi(apiDefinition({ name: 'plain', listenPath: '/plain/*', targets: [u.url] }));
  await admin.createApi({
    ...apiDefinition({ name: 'retried', listenPath: '/retried/*', targets: [u.url] }),
    plugins: [{ name: 'retry', config: { attempts: 2, backoff: '0s' } }],
  });
  // Under a second, undici arms a timer of its own per request (its shared coarse timers serve longer waits); the
  // longest such wait, so that a loaded machine does not turn the measurement into 504s.
  const last = await admin.createApi({
    ...apiDefinition({ name: 'short-wait', listenPath: '/short-wait/*', targets: [u.url] }),
    proxy: { listen_path: '/short-wait/*', upstreams: { targets: [{ target: u.url }] }, forwarding_timeouts: { response_header_timeout: '999ms' } },
  });
  expect(last.status).toBe(201);
  // The chart's young generation, and the access log on as by default (its lines go to the test's pipe).
  dp = await startDataPlane({
    controlPlaneAddr: cp.grpcAddr,
    nodeFlags: ['--max-semi-space-size=8', '--trace-gc-nvp'],
    env: { LOG_LEVEL: 'info' },
    onLine(raw) {
      const m = /^\[\d+:0x[0-9a-f]+\]\s+(\d+) ms: .*\bgc=s\b.*\bpromoted=(\d+)/.exec(raw);
      if (m) scavenges.push({ at: Number(m[1]), promoted: Number(m[2]) });
    },
  });
  await admin.waitForDataPlanes(last, [dp]);
}, 60_000);

afterAll(async () => {
  await dp?.kill();
  await cp?.dispose();
  await u?.close();
});

test.each([
  ['a plain route', '/plain/x'],
  ['a route with a forward hook (retry)', '/retried/x'],
  ['a route with a header wait under a second', '/short-wait/x'],
])(
  '%s: requests are not kept past their end (bytes promoted per request under load)',
  async (_name, path) => {
    await loadThrough(dp.proxyUrl, path, 2_000, CONCURRENCY); // warm up: the JIT's own allocations are not the requests'
    u.reset();
    const before = scavenges.length;
    await loadThrough(dp.proxyUrl, path, REQUESTS, CONCURRENCY);
    const window = scavenges.slice(before);
    // 8,000 requests of ~16 KB fill the 8 MB young generation a dozen times.
    expect(window.length).toBeGreaterThanOrEqual(5);
    const promotedPerRequest = window.reduce((sum, s) => sum + s.promoted, 0) / REQUESTS;
    expect(promotedPerRequest).toBeLessThan(MAX_PROMOTED_PER_REQUEST);
  },
  120_000,
);
