/**
 * The CP's one way to a CustomObjectsApi: every request it sends is aborted after `timeoutMs`.
 * client-node's own client waits forever, and one request hung on an apiserver that accepted it but
 * never answered froze its caller for good: leader election (a leader that cannot renew never
 * stepped down, and never renewed again), status writes, data-plane reports, admin writes.
 */
import { createConfiguration, CustomObjectsApi, ServerConfiguration, type KubeConfig } from '@kubernetes/client-node';

export function customObjectsApi(kubeConfig: KubeConfig, timeoutMs: number): CustomObjectsApi {
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig names no current cluster');
  return new CustomObjectsApi(
    createConfiguration({
      baseServer: new ServerConfiguration(cluster.server, {}),
      authMethods: { default: kubeConfig },
      promiseMiddleware: [
        {
          pre: async (context) => {
            context.setSignal(AbortSignal.timeout(timeoutMs));
            return context;
          },
          post: async (context) => context,
        },
      ],
    }),
  );
}
