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
  dataPlanes(): readonly DataPlaneView[];
  logger: Logger;
}): Controller {
  const { store, config, logger } = deps;
  let elector: LeaderElector | null = null;
  const status = createStatusController({
    store,
    dataPlanes: deps.dataPlanes,
    isLeader: () => (elector ? elector.isLeader() : true),
    logger,
  });
  if (config.leaderElection) {
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
  const unsubscribe = store.subscribeResources(() => status.trigger());
  status.trigger();
  return {
    dataPlanesChanged: () => status.trigger(),
    isLeader: () => (elector ? elector.isLeader() : true),
    async close() {
      unsubscribe();
      await status.close();
      await elector?.close();
    },
  };
}
