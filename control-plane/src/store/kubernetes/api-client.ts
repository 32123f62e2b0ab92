/**
 * The CP's one way to a CustomObjectsApi: every request it sends is aborted after `timeoutMs`, and
 * all of them share one pool of kept-alive connections.
 *
 * The timeout: client-node's own client waits forever, and one request hung on an apiserver that
 * accepted it but never answered froze its caller for good: leader election (a leader that cannot
 * renew never stepped down, and never renewed again), status writes, data-plane reports, admin writes.
 *
 * The pool: client-node makes a new https.Agent for every request (KubeConfig.applySecurityAuthentication),
 * so every request opened a new TLS connection, with a new secure context loading the CA. Under
 * bench:kubernetes at 1,000 CRs that was a third of the CP's busy time (--cpu-prof: createSecureContext,
 * the handshake, getPeerCertificate). The kubeconfig is still applied per request, so a rotated bearer
 * token (a projected service-account token) is read as before; the TLS settings (CA, client
 * certificate) are those of the first request, as a long-lived client's are, so their files are read
 * once, here: client-node would read the CA file again for every request (three per admin write).
 */
import { readFileSync } from 'node:fs';
import { Agent as HttpsAgent } from 'node:https';
import { createConfiguration, CustomObjectsApi, KubeConfig, ServerConfiguration, type Configuration, type SecurityAuthentication } from '@kubernetes/client-node';

/** `kubeConfig` with its TLS files (CA, client certificate and key) read into data; the rest shared, token sources included. */
function withTlsFilesRead(kubeConfig: KubeConfig): KubeConfig {
  const data = (file: string | undefined) => (file ? readFileSync(file).toString('base64') : undefined);
  const read = new KubeConfig();
  read.loadFromOptions({
    clusters: kubeConfig.clusters.map((c) => (c.caFile ? { ...c, caFile: undefined, caData: data(c.caFile) } : c)),
    users: kubeConfig.users.map((u) =>
      u.certFile || u.keyFile ? { ...u, certFile: undefined, keyFile: undefined, certData: data(u.certFile) ?? u.certData, keyData: data(u.keyFile) ?? u.keyData } : u,
    ),
    contexts: kubeConfig.contexts,
    currentContext: kubeConfig.currentContext,
  });
  return read;
}

export function customObjectsApi(kubeConfig: KubeConfig, timeoutMs: number): CustomObjectsApi {
  return kubernetesApi(kubeConfig, timeoutMs, CustomObjectsApi);
}

/** Any client-node API class (CoreV1Api for Secrets), with the same timeout and one pool of its own. */
export function kubernetesApi<T>(kubeConfig: KubeConfig, timeoutMs: number, Api: new (configuration: Configuration) => T): T {
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig names no current cluster');
  const config = withTlsFilesRead(kubeConfig);
  let pool: HttpsAgent | undefined;
  const auth: SecurityAuthentication = {
    getName: () => 'kubeconfig, one connection pool',
    async applySecurityAuthentication(context) {
      await config.applySecurityAuthentication(context);
      // A plain https.Agent only: a proxy's agent (cluster.proxyUrl) is left as client-node makes it.
      const made = context.getAgent();
      if (made?.constructor !== HttpsAgent) return;
      pool ??= new HttpsAgent({ ...(made as HttpsAgent).options, keepAlive: true });
      context.setAgent(pool);
    },
  };
  return new Api(
    createConfiguration({
      baseServer: new ServerConfiguration(cluster.server, {}),
      authMethods: { default: auth },
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
