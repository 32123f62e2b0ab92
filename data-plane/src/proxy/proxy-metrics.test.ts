/**
 * The proxy counts in plain numbers and hands them to prom-client at scrape time: the exposed text
 * must be what prom-client fed on every request would expose (names, labels, buckets, sums).
 */
import { Counter, Histogram, Registry } from 'prom-client';
import { createProxyMetrics, UNMATCHED_ROUTE } from './proxy-metrics.js';

const BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

function reference(registry: Registry) {
  return {
    requests: new Counter({
      name: 'gatehouse_proxy_requests_total',
      help: 'Proxied requests by route and response status (gateway errors included).',
      labelNames: ['route', 'status'],
      registers: [registry],
    }),
    upstreamSeconds: new Histogram({
      name: 'gatehouse_proxy_upstream_duration_seconds',
      help: 'Time until the upstream response headers arrived.',
      labelNames: ['route'],
      buckets: BUCKETS,
      registers: [registry],
    }),
  };
}

/** The two series under test, without the in-flight gauge the reference does not have. */
async function exposed(registry: Registry): Promise<string> {
  const names = ['gatehouse_proxy_requests_total', 'gatehouse_proxy_upstream_duration_seconds'];
  return (await Promise.all(names.map((name) => registry.getSingleMetricAsString(name)))).join('\n');
}

test('the exposition equals prom-client fed per request, across scrapes', async () => {
  const registry = new Registry();
  const metrics = createProxyMetrics(registry);
  const expectedRegistry = new Registry();
  const expected = reference(expectedRegistry);

  expect(await exposed(registry)).toBe(await exposed(expectedRegistry));

  // Every bucket boundary, values on and either side of it, past the last one, and zero.
  const timings = [0, ...BUCKETS.flatMap((b) => [b * 0.999, b, b * 1.001]), 120];
  const routes = ['api:a', 'api:b', UNMATCHED_ROUTE];
  const statuses = [200, 404, 502, 200];
  for (const [i, seconds] of timings.entries()) {
    const route = routes[i % routes.length]!;
    const status = statuses[i % statuses.length]!;
    metrics.request(route, status);
    expected.requests.inc({ route, status });
    if (route !== UNMATCHED_ROUTE) {
      metrics.upstream(route, seconds);
      expected.upstreamSeconds.observe({ route }, seconds);
    }
  }
  const first = await exposed(registry);
  expect(first).toContain('gatehouse_proxy_requests_total{route="api:a",status="200"}');
  expect(first).toContain('gatehouse_proxy_upstream_duration_seconds_bucket{le="+Inf",route="api:b"}');
  expect(first).toBe(await exposed(expectedRegistry));

  // A second scrape after more requests shows the totals, not the difference.
  metrics.request('api:a', 200);
  expected.requests.inc({ route: 'api:a', status: 200 });
  metrics.upstream('api:c', 0.003);
  expected.upstreamSeconds.observe({ route: 'api:c' }, 0.003);
  expect(await exposed(registry)).toBe(await exposed(expectedRegistry));
});
