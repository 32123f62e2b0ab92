/** Proxy metrics, registered on the Registry main.ts creates (served by the status listener). */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/**
 * What became of a request_mirror copy (proxy/mirror.ts): the mirror answered (below 500, or 500 and up), failed
 * to (unreachable, reset), timed out; or the copy was not sent: its body over the bound, the process's mirror
 * budget spent, the client's body cut short.
 */
export type MirrorOutcome = 'responded' | 'server_error' | 'error' | 'timeout' | 'body_too_large' | 'overloaded' | 'aborted';

/** The `route` label of requests no route matched (and of failures before matching). */
export const UNMATCHED_ROUTE = '(unmatched)';

export interface ProxyMetrics {
  /** Counts one response; `route` is the CompiledRoute id, UNMATCHED_ROUTE when nothing matched. */
  request(route: string, status: number): void;
  /** Time from dispatching upstream to the upstream's response headers. */
  upstream(route: string, seconds: number): void;
  /** A gRPC call's status (the upstream's, from its trailers or Trailers-Only head, or the gateway's own refusal). */
  grpc(route: string, grpcStatus: number): void;
  /** One request_mirror copy's outcome. */
  mirror(route: string, outcome: MirrorOutcome): void;
  /** A request arrived at the proxy listener / its response closed (the in-flight gauge). */
  started(): void;
  ended(): void;
  /** Requests that arrived so far (the idle trim waits for this to stand still). */
  arrived(): number;
}

const UPSTREAM_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** One route's upstream timings: observations per bucket (not cumulative; the last slot is +Inf only). */
interface Timings {
  buckets: Float64Array;
  sum: number;
  count: number;
}

interface Counted {
  route: string;
  status: number;
  count: number;
}

/** prom-client's per-series histogram state (lib/histogram.js createBaseValues), as zero() creates it. */
interface HistogramSeries {
  bucketValues: Record<number, number>;
  sum: number;
  count: number;
}

/**
 * Counted in plain per-route numbers and handed to prom-client at scrape time (collect()):
 * `counter.inc({route, status})` and `histogram.observe({route}, s)` hash their label objects on
 * every call, many times the cost of the maps below. The in-flight gauge likewise
 * (its inc() and dec() each make a label object and hash it). Names, labels, values, buckets
 * and series order exposed are the same (proxy-metrics.test.ts compares the text with prom-client fed directly).
 */
export function createProxyMetrics(registry: Registry): ProxyMetrics {
  let inFlight = 0;
  let arrived = 0;
  /** Each (route, status) once, in first-seen order (prom-client's exposition order); indexed by route, then status. */
  const series: Counted[] = [];
  const requests = new Map<string, Map<number, Counted>>();
  const timings = new Map<string, Timings>();
  new Counter({
    name: 'gatehouse_proxy_requests_total',
    help: 'Proxied requests by route and response status (gateway errors included).',
    labelNames: ['route', 'status'],
    registers: [registry],
    collect() {
      this.reset();
      for (const { route, status, count } of series) this.inc({ route, status }, count);
    },
  });
  new Histogram({
    name: 'gatehouse_proxy_upstream_duration_seconds',
    help: 'Time until the upstream response headers arrived.',
    labelNames: ['route'],
    buckets: UPSTREAM_BUCKETS,
    registers: [registry],
    collect() {
      this.reset();
      // prom-client has no public way to set a histogram's state: zero() makes each route's series
      // (in insertion order, the keys are not integers), then its bucket counts, sum and count are written.
      for (const route of timings.keys()) this.zero({ route });
      const series = Object.values((this as unknown as { hashMap: Record<string, HistogramSeries> }).hashMap);
      let i = 0;
      for (const t of timings.values()) {
        const s = series[i++]!;
        UPSTREAM_BUCKETS.forEach((bound, b) => {
          s.bucketValues[bound] = t.buckets[b]!;
        });
        s.sum = t.sum;
        s.count = t.count;
      }
    },
  });
  // gRPC calls are few beside the rest and cost hundreds of µs each over h2: prom-client's own label hashing
  // (see above) is not worth maps of our own here.
  const grpcCalls = new Counter({
    name: 'gatehouse_proxy_grpc_responses_total',
    help: "gRPC calls by route and gRPC status (grpc-status of the answer, or of the gateway's own refusal).",
    labelNames: ['route', 'grpc_status'],
    registers: [registry],
  });
  const mirrors = new Counter({
    name: 'gatehouse_mirror_requests_total',
    help: "request_mirror copies by route and outcome (the mirror's answer, its failure, or why the copy was not sent).",
    labelNames: ['route', 'outcome'],
    registers: [registry],
  });
  new Gauge({
    name: 'gatehouse_proxy_in_flight_requests',
    help: 'Requests being handled by the proxy listener.',
    registers: [registry],
    collect() {
      this.set(inFlight);
    },
  });
  return {
    request(route, status) {
      let byStatus = requests.get(route);
      if (!byStatus) requests.set(route, (byStatus = new Map()));
      let counted = byStatus.get(status);
      if (!counted) {
        counted = { route, status, count: 0 };
        byStatus.set(status, counted);
        series.push(counted);
      }
      counted.count++;
    },
    upstream(route, seconds) {
      let t = timings.get(route);
      if (!t) timings.set(route, (t = { buckets: new Float64Array(UPSTREAM_BUCKETS.length + 1), sum: 0, count: 0 }));
      let b = 0;
      while (b < UPSTREAM_BUCKETS.length && seconds > UPSTREAM_BUCKETS[b]!) b++;
      t.buckets[b]!++;
      t.sum += seconds;
      t.count++;
    },
    grpc: (route, grpcStatus) => grpcCalls.inc({ route, grpc_status: grpcStatus }),
    mirror: (route, outcome) => mirrors.inc({ route, outcome }),
    started() {
      inFlight++;
      arrived++;
    },
    ended: () => void inFlight--,
    arrived: () => arrived,
  };
}
