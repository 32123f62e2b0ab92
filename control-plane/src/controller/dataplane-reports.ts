/**
 * Data planes connect to any CP replica, but only the leader writes status: so each replica
 * publishes the replies of its own data planes in a Lease of its own (label
 * `gatehouse.dev/dataplane-report`, annotation `gatehouse.dev/dataplanes`), renewed as a heartbeat
 * and whenever one of its data planes connects, leaves, ACKs or NACKs. The leader reads them all.
 *
 * Versions are numbered per replica, but the content hash is the same everywhere, so reports name
 * what a data plane holds by hash and the leader maps each hash to its own version.
 */
import { createHash } from 'node:crypto';
import type { KubeConfig } from '@kubernetes/client-node';
import { customObjectsApi } from '../store/kubernetes/api-client.js';
import type { Logger } from '#proto/logger';
import { microTime } from './leader-election.js';
import type { DataPlaneView } from './status-controller.js';

export interface ReportedDataPlane {
  id: string;
  /** Hash of the last snapshot it ACKed; null before its first ACK. */
  ackedHash: string | null;
  /** Its last NACK, when newer than its last ACK. */
  nack: { hash: string | null; error: string } | null;
}

export interface DataPlaneReports {
  /** Publish this replica's data planes soon (coalesced). */
  changed(): void;
  /** Data planes of the other live replicas. */
  others(): Promise<ReportedDataPlane[]>;
  close(): Promise<void>;
}

const LEASES = { group: 'coordination.k8s.io', version: 'v1', plural: 'leases' };
export const REPORT_LABEL = 'gatehouse.dev/dataplane-report';
export const REPORT_ANNOTATION = 'gatehouse.dev/dataplanes';

interface ReportLease {
  metadata: { name: string; resourceVersion?: string; annotations?: Record<string, string>; labels?: Record<string, string> };
  spec?: { holderIdentity?: string; renewTime?: string; leaseDurationSeconds?: number };
}

export function startDataPlaneReports(deps: {
  kubeConfig: KubeConfig;
  namespace: string;
  leaseName: string;
  identity: string;
  leaseDurationMs: number;
  own(): ReportedDataPlane[];
  logger: Logger;
}): DataPlaneReports {
  const { namespace, identity, logger } = deps;
  // A report older than three lease durations is ignored: a request may take one at most.
  const api = customObjectsApi(deps.kubeConfig, deps.leaseDurationMs);
  const name = `${deps.leaseName}-dp-${createHash('sha256').update(identity).digest('hex').slice(0, 10)}`;
  const seconds = Math.max(1, Math.ceil(deps.leaseDurationMs / 1000));
  let timer: NodeJS.Timeout | undefined;
  let publishing: Promise<void> = Promise.resolve();
  let closed = false;

  async function publish(dataPlanes: ReportedDataPlane[]): Promise<void> {
    const body = (metadata: ReportLease['metadata']) => ({
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        ...metadata,
        labels: { ...metadata.labels, [REPORT_LABEL]: deps.leaseName },
        annotations: { ...metadata.annotations, [REPORT_ANNOTATION]: JSON.stringify(dataPlanes) },
      },
      spec: { holderIdentity: identity, leaseDurationSeconds: seconds, renewTime: microTime(Date.now()) },
    });
    try {
      const current = (await api.getNamespacedCustomObject({ ...LEASES, namespace, name })) as ReportLease;
      await api.replaceNamespacedCustomObject({ ...LEASES, namespace, name, body: body(current.metadata) });
    } catch (err) {
      if ((err as { code?: number }).code !== 404) throw err;
      await api.createNamespacedCustomObject({ ...LEASES, namespace, body: body({ name }) });
    }
  }

  function schedule(delayMs: number): void {
    clearTimeout(timer);
    timer = setTimeout(() => {
      publishing = publishing
        .then(() => publish(deps.own()))
        .catch((err: unknown) => logger.warn({ err }, 'data-plane report failed'))
        .finally(() => {
          // Heartbeat: a report not renewed for three lease durations is ignored by the leader.
          if (!closed) schedule(deps.leaseDurationMs);
        });
    }, delayMs);
  }
  schedule(0);

  return {
    changed: () => {
      if (!closed) schedule(200);
    },
    async others() {
      const list = (await api.listNamespacedCustomObject({ ...LEASES, namespace, labelSelector: `${REPORT_LABEL}=${deps.leaseName}` })) as {
        items: ReportLease[];
      };
      const fresh = Date.now() - 3 * deps.leaseDurationMs;
      return list.items
        .filter((l) => l.metadata.name !== name && Date.parse(l.spec?.renewTime ?? '') >= fresh)
        .flatMap((l) => {
          try {
            const parsed = JSON.parse(l.metadata.annotations?.[REPORT_ANNOTATION] ?? '[]') as unknown;
            return Array.isArray(parsed) ? (parsed as ReportedDataPlane[]) : [];
          } catch {
            return [];
          }
        });
    },
    async close() {
      closed = true;
      clearTimeout(timer);
      await publishing;
      // Leases cannot be deleted with the Role we hold: an empty report says "no data planes here".
      await publish([]).catch(() => undefined);
    },
  };
}

/** Remote reports in this replica's version numbers (hashes it never built count as not ACKed). */
export function toViews(reported: readonly ReportedDataPlane[], revisionOfHash: (hash: string) => number | undefined): DataPlaneView[] {
  return reported.map((dp) => ({
    id: dp.id,
    last_ack: dp.ackedHash ? { version: revisionOfHash(dp.ackedHash) ?? 0 } : null,
    last_nack: dp.nack ? { version: (dp.nack.hash && revisionOfHash(dp.nack.hash)) || 0, error: dp.nack.error } : null,
  }));
}
