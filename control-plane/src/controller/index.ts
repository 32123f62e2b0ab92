/**
 * The Kubernetes controller half of the CP (STORE=kubernetes only): a Lease elects the one replica
 * that writes status; every replica keeps serving the admin API and gRPC from its own cache.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '#proto/logger';
import type { KubernetesConfig } from '../config.js';
import type { KubernetesStore } from '../store/kubernetes/kubernetes-store.js';
import { startLeaderElection, type LeaderElector } from './leader-election.js';
import { createStatusController, type DataPlaneView } from './status-controller.js';
import { startDataPlaneReports, toViews, type DataPlaneReports, type ReportedDataPlane } from './dataplane-reports.js';

/** What the controller reads of each of this replica's data planes (grpc/ DataPlaneStatus fits). */
export interface OwnDataPlane extends DataPlaneView {
  hash: string | null;
}

export interface Controller {
  /** Call when a data plane connects, disconnects, ACKs or NACKs. */
  dataPlanesChanged(): void;
  isLeader(): boolean;
  close(): Promise<void>;
}

export function startController(deps: {
  store: KubernetesStore;
  kubeConfig: KubeConfig;
  config: KubernetesConfig;
  dataPlanes(): readonly OwnDataPlane[];
  logger: Logger;
}): Controller {
  const { store, config, logger } = deps;
  let elector: LeaderElector | null = null;
  let reports: DataPlaneReports | null = null;

  const ownReported = (): ReportedDataPlane[] =>
    deps.dataPlanes().map((dp) => {
      const ackedVersion = dp.last_ack?.version ?? 0;
      const nack = dp.last_nack && dp.last_nack.version > ackedVersion ? dp.last_nack : null;
      return {
        id: dp.id,
        ackedHash: dp.last_ack ? (store.hashOfRevision(ackedVersion) ?? dp.hash) : null,
        nack: nack ? { hash: store.hashOfRevision(nack.version) ?? null, error: nack.error } : null,
      };
    });

  async function allDataPlanes(): Promise<DataPlaneView[] | null> {
    const own = deps.dataPlanes();
    if (!reports) return [...own];
    let remote: ReportedDataPlane[];
    try {
      remote = await reports.others();
    } catch (err) {
      logger.warn({ err }, 'cannot read data-plane reports; status waits');
      return null;
    }
    const ids = new Set(own.map((dp) => dp.id));
    return [
      ...own,
      ...toViews(
        remote.filter((dp) => !ids.has(dp.id)),
        (h) => store.revisionOfHash(h),
      ),
    ];
  }

  const status = createStatusController({
    store,
    dataPlanes: allDataPlanes,
    isLeader: () => (elector ? elector.isLeader() : true),
    logger,
  });
  let poll: NodeJS.Timeout | undefined;
  if (config.leaderElection) {
    reports = startDataPlaneReports({
      kubeConfig: deps.kubeConfig,
      namespace: store.namespace,
      leaseName: config.leaseName,
      identity: config.identity,
      leaseDurationMs: config.leaseDurationMs,
      own: ownReported,
      logger,
    });
    // Other replicas' data planes change without telling us: the leader looks again periodically.
    poll = setInterval(() => status.trigger(), Math.max(1000, config.leaseDurationMs / 5));
    elector = startLeaderElection({
      kubeConfig: deps.kubeConfig,
      namespace: store.namespace,
      leaseName: config.leaseName,
      identity: config.identity,
      leaseDurationMs: config.leaseDurationMs,
      logger,
      onChange: () => status.trigger(),
    });
  }
  const unsubscribe = store.subscribeResources((changed) => status.resourcesChanged(changed));
  status.trigger();
  return {
    dataPlanesChanged: () => {
      reports?.changed();
      status.trigger();
    },
    isLeader: () => (elector ? elector.isLeader() : true),
    async close() {
      unsubscribe();
      clearInterval(poll);
      await status.close();
      await reports?.close();
      await elector?.close();
    },
  };
}
