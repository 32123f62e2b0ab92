import { Registry } from 'prom-client';
import { ADMITTED, ADMITTED_PROBE, CircuitBreaker, createBreakerRegistry, REFUSED_BUSY, REFUSED_OPEN, type BreakerSettings } from './circuit-breaker.js';

const SETTINGS: BreakerSettings = { maxConcurrent: 0, errorPercentThreshold: 50, requestVolumeThreshold: 4, sleepWindowMs: 5000, consecutiveFailures: 0 };

function breaker(settings: Partial<BreakerSettings> = {}) {
  const clock = { now: 1_000_000 };
  return { clock, cb: new CircuitBreaker({ ...SETTINGS, ...settings }, () => clock.now) };
}

/** Admits and records one request. */
const run = (cb: CircuitBreaker, failed: boolean) => cb.record(cb.admit(), failed);

test('stays closed below the request volume, whatever the error rate', () => {
  const { cb } = breaker();
  for (let i = 0; i < 3; i++) run(cb, true);
  expect(cb.current()).toBe('closed');
  expect(cb.admit()).toBe(ADMITTED);
});

test('opens once the window holds the volume and the error percentage reaches the threshold', () => {
  const { cb } = breaker();
  run(cb, false);
  run(cb, false);
  run(cb, true);
  expect(cb.current()).toBe('closed'); // 3 < volume
  run(cb, true); // 2 of 4 = 50 %
  expect(cb.current()).toBe('open');
  expect(cb.admit()).toBe(REFUSED_OPEN);
});

test('below the threshold it stays closed', () => {
  const { cb } = breaker();
  for (const failed of [false, false, false, true, false, true, false]) run(cb, failed);
  expect(cb.current()).toBe('closed');
});

test('results older than the 10 s window are forgotten', () => {
  const { cb, clock } = breaker();
  run(cb, true);
  run(cb, true);
  run(cb, true);
  clock.now += 10_000;
  run(cb, true);
  expect(cb.current()).toBe('closed');
  clock.now += 9_000;
  run(cb, true);
  run(cb, true);
  run(cb, true);
  expect(cb.current()).toBe('open');
});

test('consecutive_failures opens after that many errors in a row, whatever the volume; a success resets the count', () => {
  const { cb } = breaker({ consecutiveFailures: 3, requestVolumeThreshold: 1000 });
  run(cb, true);
  run(cb, true);
  run(cb, false);
  run(cb, true);
  run(cb, true);
  expect(cb.current()).toBe('closed');
  run(cb, true);
  expect(cb.current()).toBe('open');
});

test('after the sleep window one probe goes through; its success closes the breaker', () => {
  const { cb, clock } = breaker({ consecutiveFailures: 1 });
  run(cb, true);
  clock.now += 4_999;
  expect(cb.admit()).toBe(REFUSED_OPEN);
  clock.now += 1;
  expect(cb.current()).toBe('half-open');
  const probe = cb.admit();
  expect(probe).toBe(ADMITTED_PROBE);
  expect(cb.admit()).toBe(REFUSED_OPEN); // one probe at a time
  cb.record(probe, false);
  expect(cb.current()).toBe('closed');
  expect(cb.admit()).toBe(ADMITTED);
});

test('a failed probe opens the breaker for another sleep window', () => {
  const { cb, clock } = breaker({ consecutiveFailures: 1 });
  run(cb, true);
  clock.now += 5_000;
  cb.record(cb.admit(), true);
  expect(cb.current()).toBe('open');
  clock.now += 4_999;
  expect(cb.admit()).toBe(REFUSED_OPEN);
  clock.now += 1;
  expect(cb.admit()).toBe(ADMITTED_PROBE);
});

test('results of requests admitted before a trip do not count after it', () => {
  const { cb } = breaker({ consecutiveFailures: 1 });
  const early = cb.admit();
  run(cb, true);
  cb.record(early, false);
  expect(cb.current()).toBe('open');
});

test('max_concurrent_requests refuses past that many requests in flight', () => {
  const { cb } = breaker({ maxConcurrent: 2 });
  const a = cb.admit();
  const b = cb.admit();
  expect(cb.admit()).toBe(REFUSED_BUSY);
  cb.record(a, false);
  expect(cb.admit()).toBe(ADMITTED);
  cb.record(b, false);
});

test('the registry keeps a breaker across generations while route, target and config are unchanged, and drops the rest', async () => {
  const registry = new Registry();
  const clock = { now: 0 };
  const breakers = createBreakerRegistry({ registry, now: () => clock.now });
  const settings = { ...SETTINGS, consecutiveFailures: 1, key: 'k1' };
  const first = breakers.begin();
  const a = first.get('api:a', 'http://t1', settings);
  first.get('api:a', 'http://t2', settings);
  first.commit();
  run(a, true);
  expect(await registry.getSingleMetricAsString('gatehouse_circuit_breaker_state')).toContain(
    'gatehouse_circuit_breaker_state{route="api:a",target="http://t1"} 2',
  );

  const second = breakers.begin();
  expect(second.get('api:a', 'http://t1', settings)).toBe(a);
  expect(second.get('api:a', 'http://t1', { ...settings, key: 'k2' })).not.toBe(a);
  second.commit();
  const text = await registry.getSingleMetricAsString('gatehouse_circuit_breaker_state');
  expect(text).not.toContain('http://t2');

  const uncommitted = breakers.begin();
  uncommitted.get('api:b', 'http://t3', settings);
  expect(await registry.getSingleMetricAsString('gatehouse_circuit_breaker_state')).not.toContain('api:b');
});
