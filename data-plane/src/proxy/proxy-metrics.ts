/** Proxy metrics, registered on the Registry main.ts creates (served by the status listener). */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** The `route` label of requests no route matched (and of failures before matching). */
export const UNMATCHED_ROUTE = '(unmatched)';

export interface ProxyMetrics {
  /** `route` is the CompiledRoute id, UNMATCHED_ROUTE when nothing matched. */
  requests: Counter<'route' | 'status'>;
  /** Time from dispatching upstream to the upstream's response headers. */
  upstreamSeconds: Histogram<'route'>;
  inFlight: Gauge;
}

export function createProxyMetrics(registry: Registry): ProxyMetrics {
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
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers: [registry],
    }),
    inFlight: new Gauge({
      name: 'gatehouse_proxy_in_flight_requests',
      help: 'Requests being handled by the proxy listener.',
      registers: [registry],
    }),
  };
}
