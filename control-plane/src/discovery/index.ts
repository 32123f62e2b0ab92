/**
 * Kubernetes service discovery (docs/kubernetes.md "Service discovery"): the endpoint watch (endpoint-watch.ts)
 * and what the data planes are served (service-targets.ts), started together by main.ts.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { ApiDefinition } from '#proto/definition/index';
import type { Logger } from '#proto/logger';
import type { DefinitionStore } from '../store/index.js';
import { createEndpointWatch } from './endpoint-watch.js';
import { checkServiceTargets, serveServiceTargets, type ServedDefinitions } from './service-targets.js';

/** How long a starting CP waits for the first lists of Services and EndpointSlices before it serves anyway. */
const FIRST_LIST_WAIT_MS = 10_000;

export interface ServiceDiscovery {
  served: ServedDefinitions;
  /** The admin API's check of a written API (400 naming the target). */
  check(api: ApiDefinition): void;
  close(): void;
}

/** `kube` null: no Kubernetes client, so Service targets are refused (and served as written: NO_ENDPOINTS). */
export async function startServiceDiscovery(
  store: Pick<DefinitionStore, 'current' | 'subscribe'>,
  kube: { kubeConfig: KubeConfig; namespaces: readonly string[] } | null,
  logger: Logger,
): Promise<ServiceDiscovery> {
  let served: ServedDefinitions | undefined;
  const watch = kube && createEndpointWatch({ ...kube, changed: (namespace, service) => served?.endpointsChanged(namespace, service), logger });
  served = serveServiceTargets(store, watch, logger);
  // A restarted CP must not serve its data planes a Service without endpoints: its first snapshot waits for them.
  await watch?.ready(FIRST_LIST_WAIT_MS);
  await new Promise(setImmediate); // the first lists' changes are expanded on the next turn
  return {
    served,
    check: (api) => checkServiceTargets(api, watch),
    close() {
      served.close();
      watch?.close();
    },
  };
}
