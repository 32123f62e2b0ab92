import { createServer } from 'node:http';
import * as grpc from '@grpc/grpc-js';
import { Registry } from 'prom-client';
import { compileTarget, type CompiledTarget } from '#proto/compile/index';
import type { HealthCheckDefinition } from '#proto/definition/types';
import { listen } from '#proto/listen';
import { createHealthRegistry, poolProbe, type HealthRegistry, type Probe, type ProbeRequest } from './health-checks.js';
import { createUpstreamPools, type PoolOptions, type UpstreamPools } from '../proxy/upstream-pools.js';
import { freePort } from '../../../test/helpers/free-port.js';
import { delay, pollUntil } from '../../../test/helpers/poll-until.js';
import { startUpstream, type Upstream } from '../../../test/helpers/upstream-server.js';

type Active = NonNullable<HealthCheckDefinition['active']>;
type Passive = NonNullable<HealthCheckDefinition['passive']>;

const POOL: PoolOptions = { dialTimeoutMs: 1000, insecureSkipVerify: false };

/** Short durations: a probe every 100 ms (the schema's minimum), a passive ejection of 100 ms. */
const active = (o: Partial<Active> = {}): Active => ({
  path: '/healthz',
  interval: '100ms',
  timeout: '50ms',
  healthy_threshold: 2,
  unhealthy_threshold: 3,
  ...o,
});
const passive = (o: Partial<Passive> = {}): Passive => ({ unhealthy_threshold: 3, ejection: '100ms', ...o });

const target = (template: string, params: string[] = []): CompiledTarget => ({
  template,
  weight: 1,
  hostPattern: null,
  plan: compileTarget(template, params, 'target'),
});

/** A probe that never answers (for checks whose probes the test does not look at). */
const neverAnswers: Probe = () => new Promise<never>(() => undefined);

/** Registries a test created, stopped after it (their timers are unref'd, but must not outlive the test). */
const registries: HealthRegistry[] = [];
function registry(probe: Probe, metrics?: Registry): HealthRegistry {
  const created = createHealthRegistry({ probe, registry: metrics });
  registries.push(created);
  return created;
}
afterEach(() => {
  for (const created of registries.splice(0)) created.stop();
});

/** The committed (so started) health of http://svc:8080 under `check`. */
function watched(check: HealthCheckDefinition, probe: Probe = neverAnswers) {
  const generation = registry(probe).begin();
  const health = generation.get('api:r', target('http://svc:8080'), check, POOL);
  generation.commit();
  return health;
}

/** A probe the test answers one call at a time: `answer` waits for the next call, settles it and lets the health count it. */
function scriptedProbe() {
  const calls: Parameters<Probe>[0][] = [];
  const pending: ((verdict: string | null) => void)[] = [];
  const probe: Probe = (t) => {
    calls.push(t);
    return new Promise((resolve) => pending.push(resolve));
  };
  const nextCall = () => pollUntil(async () => (pending.length > 0 ? true : undefined), { what: 'the next probe', timeoutMs: 2000, intervalMs: 5 });
  async function answer(verdict: string | null): Promise<void> {
    await nextCall();
    pending.shift()!(verdict);
    await new Promise((resolve) => setImmediate(resolve));
  }
  return { probe, calls, answer, nextCall };
}

const until = (what: string, condition: () => boolean) => pollUntil(async () => (condition() ? true : undefined), { what, timeoutMs: 3000, intervalMs: 5 });

describe('TargetHealth', () => {
  test('starts healthy, before its first probe and before the commit', () => {
    const generation = registry(neverAnswers).begin();
    const health = generation.get('api:r', target('http://svc:8080'), { active: active(), passive: passive() }, POOL);
    expect(health.healthy).toBe(true);
    generation.commit();
    expect(health.healthy).toBe(true);
  });

  test("probes the target's origin with its Host, the check's path and timeout and the route's pool settings, whatever the target's path", async () => {
    const { probe, calls, nextCall } = scriptedProbe();
    const pool = { dialTimeoutMs: 250, insecureSkipVerify: true };
    const generation = registry(probe).begin();
    generation.get('api:r', target('https://svc.example:443/base/{id}', ['id']), { active: active({ path: '/status?deep=1', timeout: '75ms' }) }, pool);
    generation.commit();
    await nextCall();
    expect(calls[0]).toEqual({
      origin: 'https://svc.example',
      path: '/status?deep=1',
      method: 'GET',
      grpcService: null,
      headers: { host: 'svc.example', 'user-agent': 'gatehouse-health-check' },
      healthy: null,
      timeoutMs: 75,
      pool,
    });
  });

  test("the check's method, healthy statuses and headers go to the probe; a Host of its own replaces the target's", async () => {
    const { probe, calls, nextCall } = scriptedProbe();
    const generation = registry(probe).begin();
    const check = { active: active({ method: 'HEAD' as const, statuses: [200, 418], headers: { Host: 'health.internal', 'X-Probe': '1' } }) };
    generation.get('api:r', target('http://svc.example:8080'), check, POOL);
    generation.commit();
    await nextCall();
    expect(calls[0]).toMatchObject({
      method: 'HEAD',
      headers: { host: 'health.internal', 'user-agent': 'gatehouse-health-check', 'x-probe': '1' },
      healthy: new Set([200, 418]),
    });
  });

  test('passive statuses: the listed ones count (and no response always does), 502 no longer', () => {
    const health = watched({ passive: passive({ unhealthy_threshold: 2, ejection: '1h', statuses: [500, 429] }) });
    health.observe(502);
    health.observe(502);
    expect(health.healthy).toBe(true);
    health.observe(429);
    health.observe(0);
    expect(health.healthy).toBe(false);
  });

  test("passive: a gRPC call's Trailers-Only UNAVAILABLE counts as a 503, other gRPC statuses as their HTTP 200", () => {
    const health = watched({ passive: passive({ unhealthy_threshold: 2, ejection: '1h' }) });
    health.observe(200, 14);
    health.observe(200, 8);
    expect(health.healthy).toBe(true);
    health.observe(200, 14);
    health.observe(200, 14);
    expect(health.healthy).toBe(false);
    // Not counted when passive.statuses leaves 503 out.
    const without503 = watched({ passive: passive({ unhealthy_threshold: 1, ejection: '1h', statuses: [502] }) });
    without503.observe(200, 14);
    expect(without503.healthy).toBe(true);
  });

  test('active: unhealthy after exactly unhealthy_threshold failed probes in a row; a success in between resets the count', async () => {
    const { probe, answer } = scriptedProbe();
    const health = watched({ active: active({ unhealthy_threshold: 3 }) }, probe);
    await answer('status 500');
    await answer('status 500');
    await answer(null);
    await answer('status 500');
    await answer('status 500');
    expect(health.healthy).toBe(true);
    await answer('status 500');
    expect(health.healthy).toBe(false);
  });

  test('active: back after exactly healthy_threshold successful probes in a row; a failure in between resets the count', async () => {
    const { probe, answer } = scriptedProbe();
    const health = watched({ active: active({ unhealthy_threshold: 1, healthy_threshold: 3 }) }, probe);
    await answer('connect ECONNREFUSED');
    expect(health.healthy).toBe(false);
    await answer(null);
    await answer(null);
    await answer('status 503');
    await answer(null);
    await answer(null);
    expect(health.healthy).toBe(false);
    await answer(null);
    expect(health.healthy).toBe(true);
  });

  test('active: a probe that throws counts as a failed probe', async () => {
    let calls = 0;
    const health = watched({ active: active({ unhealthy_threshold: 2 }) }, async () => {
      calls++;
      throw new Error('probe broke');
    });
    await until('two probes', () => calls >= 2);
    await until('the target to be unhealthy', () => !health.healthy);
    expect(calls).toBe(2);
  });

  test.each([0, 502, 503, 504])('passive: status %s counts as a failure; unhealthy after exactly unhealthy_threshold in a row', (status) => {
    const health = watched({ passive: passive({ unhealthy_threshold: 3, ejection: '1h' }) });
    health.observe(status);
    health.observe(status);
    expect(health.healthy).toBe(true);
    health.observe(status);
    expect(health.healthy).toBe(false);
  });

  test('passive: the failing statuses count together', () => {
    const health = watched({ passive: passive({ unhealthy_threshold: 4, ejection: '1h' }) });
    for (const status of [0, 502, 503]) health.observe(status);
    expect(health.healthy).toBe(true);
    health.observe(504);
    expect(health.healthy).toBe(false);
  });

  test.each([200, 204, 301, 400, 404, 429, 500, 501])('passive: status %s resets the count', (status) => {
    const health = watched({ passive: passive({ unhealthy_threshold: 3, ejection: '1h' }) });
    health.observe(502);
    health.observe(502);
    health.observe(status);
    health.observe(502);
    health.observe(502);
    expect(health.healthy).toBe(true);
    health.observe(502);
    expect(health.healthy).toBe(false);
  });

  test('passive without active: back after the ejection, and not before; requests seen meanwhile change nothing', async () => {
    const health = watched({ passive: passive({ unhealthy_threshold: 1, ejection: '300ms' }) });
    const ejectedAt = Date.now();
    health.observe(503);
    expect(health.healthy).toBe(false);
    health.observe(200);
    expect(health.healthy).toBe(false);
    await until('the ejection to end', () => health.healthy);
    expect(Date.now() - ejectedAt).toBeGreaterThanOrEqual(290);
    // Counted from zero again.
    health.observe(503);
    expect(health.healthy).toBe(false);
  });

  test('a check without a passive part ignores proxied statuses', async () => {
    const health = watched({ active: active({ unhealthy_threshold: 1 }) });
    for (let i = 0; i < 10; i++) health.observe(502);
    expect(health.healthy).toBe(true);
  });

  test('active and passive: a passive ejection is ended by the probes, not by the ejection timer', async () => {
    const { probe, answer } = scriptedProbe();
    const health = watched({ active: active({ healthy_threshold: 2 }), passive: passive({ unhealthy_threshold: 2, ejection: '100ms' }) }, probe);
    health.observe(502);
    health.observe(0);
    expect(health.healthy).toBe(false);
    await delay(400); // four ejections long, with the first probe still unanswered
    expect(health.healthy).toBe(false);
    await answer(null);
    expect(health.healthy).toBe(false);
    await answer(null);
    expect(health.healthy).toBe(true);
  });

  test('stop() between two probes: no further probe', async () => {
    const { probe, calls, answer } = scriptedProbe();
    const health = watched({ active: active() }, probe);
    await answer(null);
    health.stop();
    await delay(350);
    expect(calls).toHaveLength(1);
  });

  test('stop() during a probe: its verdict is ignored and no further probe follows', async () => {
    const { probe, calls, answer, nextCall } = scriptedProbe();
    const health = watched({ active: active({ unhealthy_threshold: 1 }) }, probe);
    await answer(null);
    await nextCall();
    health.stop();
    await answer('status 500');
    expect(health.healthy).toBe(true);
    await delay(350);
    expect(calls).toHaveLength(2);
  });
});

/** A registry whose probes all succeed, recording the origin of each. */
function recordingRegistry() {
  const probed: string[] = [];
  const health = registry(async ({ origin }) => {
    probed.push(origin);
    return null;
  });
  return { health, probed, count: (origin: string) => probed.filter((o) => o === origin).length };
}

describe('createHealthRegistry', () => {
  const CHECK: HealthCheckDefinition = { active: active(), passive: passive() };

  test('get() with the same origin, check and pool settings returns one shared TargetHealth, whatever the route or target path', () => {
    const generation = registry(neverAnswers).begin();
    const first = generation.get('api:one', target('http://svc:8080/a'), CHECK, POOL);
    const second = generation.get('api:two', target('http://svc:8080/b/{id}', ['id']), structuredClone(CHECK), { ...POOL });
    expect(second).toBe(first);
  });

  test.each<[string, string, HealthCheckDefinition, PoolOptions]>([
    ['another check', 'http://svc:8080', { active: active({ interval: '200ms' }), passive: passive() }, POOL],
    ['a check without its passive part', 'http://svc:8080', { active: active() }, POOL],
    ['another port', 'http://svc:8081', CHECK, POOL],
    ['another host', 'http://svc2:8080', CHECK, POOL],
    ['another scheme', 'https://svc:8080', CHECK, POOL],
    ['another dial timeout', 'http://svc:8080', CHECK, { ...POOL, dialTimeoutMs: 5 }],
    ['insecure_skip_verify', 'http://svc:8080', CHECK, { ...POOL, insecureSkipVerify: true }],
  ])('get() gives a TargetHealth of its own for %s', (_name, template, check, pool) => {
    const generation = registry(neverAnswers).begin();
    const base = generation.get('api:one', target('http://svc:8080'), CHECK, POOL);
    expect(generation.get('api:two', target(template), check, pool)).not.toBe(base);
  });

  test('commit() starts the checks of the new generation and stops those it dropped (a full snapshot: releaseAll)', async () => {
    const { health, probed, count } = recordingRegistry();
    const first = health.begin();
    first.get('api:a', target('http://a:1'), CHECK, POOL);
    await delay(250);
    expect(probed).toEqual([]); // nothing is probed before the commit
    first.commit();
    await until('a probe of a', () => count('http://a:1') > 0);
    const second = health.begin();
    second.releaseAll();
    second.get('api:b', target('http://b:1'), CHECK, POOL);
    second.commit();
    const probesOfA = count('http://a:1');
    await until('two probes of b', () => count('http://b:1') >= 2);
    await delay(250);
    expect(count('http://a:1')).toBe(probesOfA);
  });

  test('a generation that is never committed (a rejected snapshot) starts nothing and stops nothing', async () => {
    const { health, count } = recordingRegistry();
    const first = health.begin();
    first.get('api:a', target('http://a:1'), CHECK, POOL);
    first.commit();
    health.begin().get('api:b', target('http://b:1'), CHECK, POOL);
    const before = count('http://a:1');
    await until('two more probes of a', () => count('http://a:1') >= before + 2);
    expect(count('http://b:1')).toBe(0);
  });

  test('the state is kept across generations while the key is unchanged, and the check goes on', async () => {
    let verdict: string | null = 'status 503';
    const health = registry(async () => verdict);
    const check = () => ({ active: active({ unhealthy_threshold: 1, healthy_threshold: 1 }) });
    const first = health.begin();
    const before = first.get('api:a', target('http://svc:8080'), check(), POOL);
    first.commit();
    await until('the target to be unhealthy', () => !before.healthy);
    // Another snapshot: a new check object with the same content, the target now used by another route too.
    const second = health.begin();
    const after = second.get('api:a', target('http://svc:8080/v2'), check(), POOL);
    expect(second.get('api:b', target('http://svc:8080'), check(), POOL)).toBe(after);
    second.commit();
    expect(after).toBe(before);
    expect(after.healthy).toBe(false);
    verdict = null;
    await until('the kept check to see the target healthy again', () => after.healthy);
  });

  test('a changed check starts from a fresh, healthy state', async () => {
    const health = registry(async () => 'status 503');
    const first = health.begin();
    const before = first.get('api:a', target('http://svc:8080'), { active: active({ unhealthy_threshold: 1 }) }, POOL);
    first.commit();
    await until('the target to be unhealthy', () => !before.healthy);
    const second = health.begin();
    const after = second.get('api:a', target('http://svc:8080'), { active: active({ unhealthy_threshold: 2 }) }, POOL);
    second.commit();
    expect(after).not.toBe(before);
    expect(after.healthy).toBe(true);
  });

  test('the gauge gatehouse_upstream_target_healthy shows 1 or 0 for each route and target using a health', async () => {
    const metrics = new Registry();
    const health = registry(neverAnswers, metrics);
    const rows = async () =>
      (await metrics.getSingleMetric('gatehouse_upstream_target_healthy')!.get()).values.map((v) => [v.labels.route, v.labels.target, v.value]).sort();
    const check: HealthCheckDefinition = { passive: passive({ unhealthy_threshold: 1, ejection: '1h' }) };
    const first = health.begin();
    const shared = first.get('api:one', target('http://svc:8080'), check, POOL);
    first.get('api:two', target('http://svc:8080/v2'), check, POOL);
    first.get('api:three', target('http://other:8080'), check, POOL);
    expect(await rows()).toEqual([]); // nothing shown before the commit
    first.commit();
    shared.observe(503);
    expect(await rows()).toEqual([
      ['api:one', 'http://svc:8080', 0],
      ['api:three', 'http://other:8080', 1],
      ['api:two', 'http://svc:8080/v2', 0],
    ]);
    expect(await metrics.metrics()).toContain('gatehouse_upstream_target_healthy{route="api:one",target="http://svc:8080"} 0');
    // A later full snapshot without api:three: its row is gone; the others are kept with their state.
    const second = health.begin();
    second.releaseAll();
    second.get('api:one', target('http://svc:8080'), check, POOL);
    second.get('api:two', target('http://svc:8080/v2'), check, POOL);
    second.commit();
    expect(await rows()).toEqual([
      ['api:one', 'http://svc:8080', 0],
      ['api:two', 'http://svc:8080/v2', 0],
    ]);
  });

  test('stop() stops every check', async () => {
    const { health, probed } = recordingRegistry();
    const generation = health.begin();
    generation.get('api:a', target('http://a:1'), CHECK, POOL);
    generation.get('api:b', target('http://b:1'), CHECK, POOL);
    generation.commit();
    await until('a probe of each', () => probed.includes('http://a:1') && probed.includes('http://b:1'));
    health.stop();
    const count = probed.length;
    await delay(250);
    expect(probed).toHaveLength(count);
  });
});

describe('poolProbe', () => {
  let pools: UpstreamPools;
  let upstream: Upstream;
  beforeEach(async () => {
    pools = createUpstreamPools();
    upstream = await startUpstream('probed');
  });
  afterEach(async () => {
    await upstream.close();
    await pools.close();
  });

  const probeOf = (origin: string, timeoutMs = 1000, path = '/healthz', options: Partial<ProbeRequest> = {}) =>
    poolProbe(pools)({
      origin,
      path,
      method: 'GET',
      headers: { host: 'svc.example:8080', 'user-agent': 'gatehouse-health-check' },
      healthy: null,
      grpcService: null,
      timeoutMs,
      pool: POOL,
      ...options,
    });

  test.each([
    [200, null],
    [204, null],
    [302, null],
    [399, null],
    [400, 'status 400'],
    [404, 'status 404'],
    [500, 'status 500'],
    [503, 'status 503'],
  ])('a %s answer gives %s', async (status, verdict) => {
    upstream.setBehaviour({ kind: 'fixed', status, headers: status === 302 ? { location: '/elsewhere' } : {} });
    await expect(probeOf(upstream.url)).resolves.toBe(verdict);
  });

  test.each([
    [418, null],
    [200, 'status 200'],
  ])('with healthy statuses [418]: a %s answer gives %s', async (status, verdict) => {
    upstream.setBehaviour({ kind: 'fixed', status });
    await expect(probeOf(upstream.url, 1000, '/healthz', { healthy: new Set([418]) })).resolves.toBe(verdict);
  });

  test('HEAD with headers of its own is sent as given', async () => {
    await expect(
      probeOf(upstream.url, 1000, '/h', { method: 'HEAD', headers: { host: 'health.internal', 'user-agent': 'gatehouse-health-check', 'x-probe': 'yes' } }),
    ).resolves.toBeNull();
    const seen = upstream.last()!;
    expect(seen).toMatchObject({ method: 'HEAD', url: '/h' });
    expect(seen.headers).toMatchObject({ host: 'health.internal', 'x-probe': 'yes' });
  });

  test('a body past the 64 KiB read bound does not change the verdict', async () => {
    upstream.setBehaviour({ kind: 'big', bytes: 200_000 });
    await expect(probeOf(upstream.url)).resolves.toBeNull();
  });

  test('sends GET of the given path with the Host given and user-agent gatehouse-health-check', async () => {
    await expect(probeOf(upstream.url, 1000, '/status?deep=1')).resolves.toBeNull();
    const seen = upstream.last()!;
    expect(seen.method).toBe('GET');
    expect(seen.url).toBe('/status?deep=1');
    expect(seen.headers.host).toBe('svc.example:8080');
    expect(seen.headers['user-agent']).toBe('gatehouse-health-check');
  });

  test('successive probes of an origin reuse one pooled connection (the body is read to the end)', async () => {
    let connections = 0;
    const server = createServer((_req, res) => res.end('x'.repeat(10_000)));
    server.on('connection', () => connections++);
    const port = await listen(server, 0, '127.0.0.1');
    try {
      for (let i = 0; i < 3; i++) {
        await expect(probeOf(`http://127.0.0.1:${port}`)).resolves.toBeNull();
        // Probes come an interval apart; back to back, undici may not have freed the connection yet.
        await delay(20);
      }
      expect(connections).toBe(1);
    } finally {
      await new Promise((resolve) => {
        server.close(resolve);
        server.closeAllConnections();
      });
    }
  });

  test('a target that never answers fails once the timeout has passed, saying so', async () => {
    upstream.setBehaviour({ kind: 'hang' });
    const started = Date.now();
    const verdict = await probeOf(upstream.url, 200);
    const elapsed = Date.now() - started;
    expect(verdict).toBe('no answer within 200 ms');
    expect(elapsed).toBeGreaterThanOrEqual(190);
    expect(elapsed).toBeLessThan(1500);
  });

  test('a refused connection gives a reason', async () => {
    const verdict = await probeOf(`http://127.0.0.1:${await freePort()}`);
    expect(verdict).toEqual(expect.stringContaining('ECONNREFUSED'));
  });
});

describe('poolProbe, gRPC health protocol (active.grpc)', () => {
  const same = (b: Buffer): Buffer => b;
  const HEALTH = {
    Check: {
      path: '/grpc.health.v1.Health/Check',
      requestStream: false,
      responseStream: false,
      requestSerialize: same,
      requestDeserialize: same,
      responseSerialize: same,
      responseDeserialize: same,
    },
  };
  /** HealthCheckResponse{status}: field 1, varint. */
  const answer = (status: number) => Buffer.from([0x08, status]);
  let server: grpc.Server;
  let pools: UpstreamPools;
  let origin: string;
  /** The service names asked for, in order. */
  const asked: string[] = [];
  beforeAll(async () => {
    server = new grpc.Server();
    server.addService(HEALTH, {
      Check(call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) {
        // HealthCheckRequest{service}: absent for "", else field 1, length, bytes.
        const service = call.request.length === 0 ? '' : call.request.subarray(2).toString();
        asked.push(service);
        if (service === '' || service === 'up') callback(null, answer(1));
        else if (service === 'down') callback(null, answer(2));
        else if (service === 'hang') return;
        else callback({ code: grpc.status.NOT_FOUND, details: 'unknown service' });
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    origin = `http://127.0.0.1:${port}`;
    pools = createUpstreamPools();
  });
  afterAll(async () => {
    server.forceShutdown();
    await pools.close();
  });

  const probe = (grpcService: string, timeoutMs = 1000) =>
    poolProbe(pools)({
      origin,
      path: '/grpc.health.v1.Health/Check',
      method: 'GET',
      grpcService,
      headers: { host: 'svc', 'user-agent': 'gatehouse-health-check' },
      healthy: null,
      timeoutMs,
      pool: { ...POOL, http2: true },
    });

  test.each([
    ['', null],
    ['up', null],
    ['down', 'NOT_SERVING'],
    ['missing', 'grpc-status 5'],
  ])('service %j → %s', async (service, verdict) => {
    expect(await probe(service)).toBe(verdict);
    expect(asked.at(-1)).toBe(service);
  });

  test('a call that gets no answer in time fails the probe', async () => {
    expect(await probe('hang', 200)).toMatch(/200 ms/);
  });
});
