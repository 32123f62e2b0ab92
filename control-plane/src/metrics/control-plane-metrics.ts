/**
 * Prometheus metrics of the control plane, on a Registry owned by this instance (never the
 * prom-client global), so two control planes in one process (tests) do not share counters.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { StreamCallbacks } from '../grpc/snapshot-server.js';

export interface ControlPlaneMetrics {
  registry: Registry;
  /** Route is the matched route pattern (bounded label set), or "unmatched". */
  observeHttp(method: string, route: string, status: number, seconds: number): void;
  /** Hook these into the snapshot server. */
  streamCallbacks: StreamCallbacks;
}

export interface MetricsOptions {
  snapshotVersion(): number;
  connectedDataPlanes(): number;
  /** Process metrics (CPU, memory, event loop); off in tests to keep them fast. */
  defaultMetrics?: boolean;
}

export function createControlPlaneMetrics(options: MetricsOptions): ControlPlaneMetrics {
  const registry = new Registry();
  if (options.defaultMetrics) collectDefaultMetrics({ register: registry });

  const requests = new Counter({
    name: 'gatehouse_admin_http_requests_total',
    help: 'Admin API requests by method, route and status',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'gatehouse_admin_http_request_duration_seconds',
    help: 'Admin API request duration',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
    registers: [registry],
  });
  new Gauge({
    name: 'gatehouse_snapshot_version',
    help: 'Current snapshot version',
    registers: [registry],
    collect() {
      this.set(options.snapshotVersion());
    },
  });
  new Gauge({
    name: 'gatehouse_connected_dataplanes',
    help: 'Data planes with an open snapshot stream',
    registers: [registry],
    collect() {
      this.set(options.connectedDataPlanes());
    },
  });
  const pushes = new Counter({
    name: 'gatehouse_snapshot_pushes_total',
    help: 'Snapshots pushed to data planes, by content: the whole snapshot or a delta',
    labelNames: ['content'],
    registers: [registry],
  });
  for (const content of ['snapshot', 'delta']) pushes.inc({ content }, 0);
  const acks = new Counter({ name: 'gatehouse_snapshot_acks_total', help: 'Snapshot ACKs from data planes', registers: [registry] });
  const nacks = new Counter({ name: 'gatehouse_snapshot_nacks_total', help: 'Snapshot NACKs from data planes', registers: [registry] });

  return {
    registry,
    observeHttp(method, route, status, seconds) {
      const labels = { method, route, status: String(status) };
      requests.inc(labels);
      duration.observe(labels, seconds);
    },
    streamCallbacks: {
      onPush: (_dp, _snapshot, content) => pushes.inc({ content }),
      onAck: () => acks.inc(),
      onNack: () => nacks.inc(),
    },
  };
}
