/**
 * Picks the definition store from configuration: the embedded file store (default) or the
 * Kubernetes custom resources. main.ts calls this and nothing else of store/.
 */
import { readFile } from 'node:fs/promises';
import { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '#proto/logger';
import type { ControlPlaneConfig } from '../config.js';
import type { DefinitionStore } from './index.js';
import { openFileStore } from './file-store.js';
import { openKubernetesStore, type KubernetesStore } from './kubernetes/kubernetes-store.js';

export const SERVICE_ACCOUNT_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

export type OpenedStore = { kind: 'file'; store: DefinitionStore } | { kind: 'kubernetes'; store: KubernetesStore; kubeConfig: KubeConfig };

/** GATEHOUSE_NAMESPACE, else the pod's own namespace, else `default`. */
async function resolveNamespace(configured: string | undefined): Promise<string> {
  if (configured) return configured;
  try {
    return (await readFile(SERVICE_ACCOUNT_NAMESPACE_FILE, 'utf8')).trim() || 'default';
  } catch {
    return 'default';
  }
}

export async function openStore(config: ControlPlaneConfig, logger: Logger): Promise<OpenedStore> {
  if (config.store === 'file' || !config.kubernetes) return { kind: 'file', store: await openFileStore({ dataDir: config.dataDir, logger }) };
  const kubeConfig = new KubeConfig();
  // KUBECONFIG / ~/.kube/config, else the in-cluster service account.
  kubeConfig.loadFromDefault();
  const namespace = await resolveNamespace(config.kubernetes.namespace);
  logger.info({ namespace, server: kubeConfig.getCurrentCluster()?.server }, 'opening kubernetes store');
  return { kind: 'kubernetes', store: await openKubernetesStore({ kubeConfig, namespace, logger, rateLimit: config.kubernetes.apiRateLimit }), kubeConfig };
}
