/**
 * Data-plane faults with figures: 1,000 idle keep-alive connections plus clients
 * trickling header bytes (slowloris) do not starve a normal client, and the DP's resident memory
 * does not grow beyond 10 % over 100,000 proxied requests after a 50,000-request warm-up. Each test starts its own
 * processes and prints its figures; none asserts a tight timing.
 */
import { connect, type Socket } from 'node:net';
import { apiDefinition } from '../helpers/api-definition.js';
import { httpRequest } from '../helpers/http-request.js';
import { startLoad, stopAllLoads } from '../helpers/load-generator.js';
import { delay } from '../helpers/poll-until.js';
import { rssMiB } from '../helpers/process-stats.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

// A test that fails while its load runs must not leave the load running into the next ones.
afterEach(stopAllLoads);

async function gatewayWithApi(name: string): Promise<{ gw: Gateway; upstream: Upstream; path: string }> {
  const upstream = await startUpstream(name);
  const gw = await startGateway({ controlPlane: { name: `cp-${name}` } });
  const created = await gw.admin.createApi(apiDefinition({ name, listenPath: `/${name}/*`, targets: [upstream.url] }));
  await gw.admin.waitForDataPlanes(created, gw.dps);
  return { gw, upstream, path: `/${name}/x` };
}

/** A raw socket that has sent `request` and, when `awaitResponse`, read the start of its answer. */
function openSocket(port: number, request: string, awaitResponse: boolean): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(request);
      if (!awaitResponse) resolve(socket);
    });
    socket.once('error', reject);
    if (awaitResponse) {
      socket.once('data', (chunk: Buffer) => {
        if (chunk.toString('latin1').startsWith('HTTP/1.1 200')) resolve(socket);
        else reject(new Error(`unexpected answer: ${chunk.toString('latin1').slice(0, 80)}`));
      });
    }
  });
}

async function openSockets(count: number, batch: number, open: () => Promise<Socket>): Promise<Socket[]> {
  const sockets: Socket[] = [];
  for (let i = 0; i < count; i += batch) sockets.push(...(await Promise.all(Array.from({ length: Math.min(batch, count - i) }, open))));
  return sockets;
}

test('1,000 idle keep-alive connections and 200 slowloris clients do not starve a normal client', async () => {
  const IDLE = 1_000;
  const SLOW = 200;
  const NORMAL = 20;
  const { gw, upstream, path } = await gatewayWithApi('starve');
  const sockets: Socket[] = [];
  let trickle: NodeJS.Timeout | undefined;
  try {
    const port = gw.dp.proxyPort;
    // Each idle connection has been answered once and stays open (keep-alive), sending nothing more.
    sockets.push(...(await openSockets(IDLE, 100, () => openSocket(port, `GET ${path} HTTP/1.1\r\nHost: starve.test\r\n\r\n`, true))));
    // Slowloris: a request line, then one header byte at a time, never the blank line that ends them.
    const slow = await openSockets(SLOW, 100, () => openSocket(port, `GET ${path} HTTP/1.1\r\nHost: starve.test\r\n`, false));
    sockets.push(...slow);
    trickle = setInterval(() => {
      for (const socket of slow) if (!socket.destroyed) socket.write('X');
    }, 100);

    const latencies: number[] = [];
    for (let i = 0; i < NORMAL; i++) {
      const started = performance.now();
      const res = await httpRequest(`${gw.dp.proxyUrl}${path}`, { timeoutMs: 5_000 });
      latencies.push(performance.now() - started);
      expect(res.status).toBe(200);
    }
    const open = sockets.filter((socket) => !socket.destroyed);
    const idleOpen = open.filter((socket) => !slow.includes(socket)).length;
    const slowOpen = open.length - idleOpen;
    latencies.sort((a, b) => a - b);
    console.log(
      `${IDLE} idle keep-alive + ${SLOW} slowloris connections (${idleOpen} and ${slowOpen} still open): ${NORMAL} normal requests all 200, ` +
        `latency median ${latencies[NORMAL >> 1].toFixed(1)} ms, max ${latencies[NORMAL - 1].toFixed(1)} ms`,
    );
    expect(slowOpen).toBe(SLOW);
  } finally {
    clearInterval(trickle);
    for (const socket of sockets) socket.destroy();
    await gw.stop();
    await upstream.close();
  }
}, 60_000);

test('DP resident memory does not grow beyond 10 % over 100,000 proxied requests after a 50,000-request warm-up', async () => {
  const WARM_UP = 50_000;
  const MEASURED = 100_000;
  const SAMPLE_EVERY = 5_000;
  const { gw, upstream, path } = await gatewayWithApi('rss');
  try {
    const pid = gw.dp.process.pid;
    // One steady run, RSS read while it runs: between runs an idle V8 gives memory back, which
    // says nothing about growth under load.
    const load = startLoad({ origin: gw.dp.proxyUrl, path, concurrency: 32, connections: 16, pipelining: 2, requests: WARM_UP + MEASURED });
    const samples: Array<{ answered: number; rss: number }> = [];
    let finished = false;
    void load.done.then(() => (finished = true));
    for (let next = WARM_UP; next < WARM_UP + MEASURED && !finished; ) {
      await delay(50);
      const answered = load.progress().ok + load.progress().failed;
      if (answered < next) continue;
      samples.push({ answered, rss: await rssMiB(pid) });
      upstream.reset(); // the test's own upstream keeps records; the DP's memory is what is measured
      next += SAMPLE_EVERY;
    }
    const result = await load.done;
    samples.push({ answered: result.ok + result.failed, rss: await rssMiB(pid) });
    // One sample lands anywhere on V8's GC sawtooth: the old space grows ~150 bytes per request until
    // a full collection, whose timing moves from run to run (a reading may be 20 MiB above the last
    // one, then fall back). The lowest reading of a window is the closest it came to live memory, so the
    // floors of the first and last halves are compared. A leak lifts the floor; the floor falling is
    // V8 returning pages after a full collection, so only growth beyond 10 % fails.
    const half = Math.floor(samples.length / 2);
    const start = Math.min(...samples.slice(0, half).map(({ rss }) => rss));
    const end = Math.min(...samples.slice(-half).map(({ rss }) => rss));
    const drift = (end - start) / start;
    console.log(
      `DP RSS over ${result.ok - samples[0].answered} requests after ${samples[0].answered} warm-up (${Math.round(result.ok / (result.elapsedMs / 1000))} req/s): ` +
        `${samples.map(({ rss }) => rss.toFixed(1)).join(', ')} MiB (every ${SAMPLE_EVERY}); floor ${start.toFixed(1)} → ${end.toFixed(1)} MiB (${(drift * 100).toFixed(1)} %)`,
    );
    expect(result.failures).toEqual([]);
    expect(result.ok).toBe(WARM_UP + MEASURED);
    expect(samples.length).toBeGreaterThanOrEqual(MEASURED / SAMPLE_EVERY);
    expect(drift).toBeLessThanOrEqual(0.1);
  } finally {
    await gw.stop();
    await upstream.close();
  }
}, 300_000);
