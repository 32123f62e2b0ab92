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
 *
 * The rate limit: a token bucket of `qps` tokens a second holding up to `burst`, as client-go's
 * client-side limit, shared by the clients given the same limiter; a request waits for its token
 * before it is sent, so a burst of status writes cannot flood a shared apiserver.
 */
import { readFileSync } from 'node:fs';
import { Agent as HttpsAgent, request as httpsRequest, type RequestOptions } from 'node:https';
import {
  createConfiguration,
  CustomObjectsApi,
  KubeConfig,
  ServerConfiguration,
  type Configuration,
  type KubernetesObject,
  type SecurityAuthentication,
} from '@kubernetes/client-node';

/** `kubeConfig` with its TLS files (CA, client certificate and key) read into data; the rest shared, token sources included. */
function withTlsFilesRead(kubeConfig: KubeConfig): KubeConfig {
  const data = (file: string | undefined) => (file ? readFileSync(file).toString('base64') : undefined);
  const read = new KubeConfig();
  read.loadFromOptions({
    clusters: kubeConfig.clusters.map((c) => (c.caFile ? { ...c, caFile: undefined, caData: data(c.caFile) } : c)),
    users: kubeConfig.users.map((u) =>
      u.certFile || u.keyFile
        ? { ...u, certFile: undefined, keyFile: undefined, certData: data(u.certFile) ?? u.certData, keyData: data(u.keyFile) ?? u.keyData }
        : u,
    ),
    contexts: kubeConfig.contexts,
    currentContext: kubeConfig.currentContext,
  });
  return read;
}

export interface RateLimit {
  /** Requests a second, sustained. */
  qps: number;
  /** Requests sent at once after a quiet spell. */
  burst: number;
}

export interface RateLimiter {
  /** Resolves when the request may be sent. */
  take(): Promise<void>;
}

/** A token bucket: a caller beyond the tokens at hand reserves the next one and waits for it, so callers go in order. */
export function createRateLimiter({ qps, burst }: RateLimit, now: () => number = performance.now.bind(performance)): RateLimiter {
  let tokens = burst;
  let last = now();
  return {
    take() {
      const t = now();
      tokens = Math.min(burst, tokens + ((t - last) * qps) / 1000) - 1;
      last = t;
      return tokens >= 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, (-tokens * 1000) / qps));
    },
  };
}

export function customObjectsApi(kubeConfig: KubeConfig, timeoutMs: number, limiter?: RateLimiter): CustomObjectsApi {
  return kubernetesApi(kubeConfig, timeoutMs, CustomObjectsApi, limiter);
}

/** Any client-node API class (CoreV1Api for Secrets), with the same timeout and one pool of its own. */
export function kubernetesApi<T>(kubeConfig: KubeConfig, timeoutMs: number, Api: new (configuration: Configuration) => T, limiter?: RateLimiter): T {
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
            await limiter?.take();
            context.setSignal(AbortSignal.timeout(timeoutMs));
            return context;
          },
          post: async (context) => context,
        },
      ],
    }),
  );
}

/** An apiserver answer other than 2xx; `code` is its HTTP status, as on client-node's ApiException. */
export class KubernetesApiError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

export type JsonPutter = (path: string, body: object) => Promise<void>;

/**
 * Connections the status writer opens at most; writes beyond wait in its pool's queue. A burst of first statuses
 * (a thousand at once) otherwise opened a TLS connection for each.
 */
export const MAX_APISERVER_SOCKETS = 16;

/** The most of an error answer read for its message. */
const ERROR_BODY_MAX = 64 * 1024;

/**
 * PUTs a JSON object to an apiserver path (`/apis/…/status`) and reads the answer for its HTTP status
 * only: the status writes, by the thousand when CRs are new, whose answer (the whole CR, which the
 * watch delivers again) client-node would parse and its request machinery wrap (node-fetch, its
 * RequestContext): 29 % of the CP's busy time while 10,000 first statuses were written (--cpu-prof under
 * bench:kubernetes), the parse of the answer alone 5.5 %. The same timeout, pooled
 * connections and rate limit as kubernetesApi's; the kubeconfig (the bearer token) applied per request
 * through client-node's public applyToHTTPSOptions. A 409 (the resourceVersion sent is stale) and any
 * other error reject with a KubernetesApiError carrying the apiserver's message. HTTPS only: undefined for
 * an apiserver on plain HTTP (client-node's own call then).
 */
export function jsonPutter(kubeConfig: KubeConfig, timeoutMs: number, limiter?: RateLimiter): JsonPutter | undefined {
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig names no current cluster');
  if (new URL(cluster.server).protocol !== 'https:') return undefined;
  const config = withTlsFilesRead(kubeConfig);
  let pool: HttpsAgent | undefined;
  return async (path, body) => {
    await limiter?.take();
    const applied: RequestOptions = {};
    await config.applyToHTTPSOptions(applied);
    // The TLS settings are the agent's (as client-node's requests take them): not repeated per request.
    let agent = applied.agent;
    if (agent?.constructor === HttpsAgent)
      agent = pool ??= new HttpsAgent({ ...(agent as HttpsAgent).options, keepAlive: true, maxSockets: MAX_APISERVER_SOCKETS });
    const payload = JSON.stringify(body);
    const headers = { ...applied.headers, accept: 'application/json', 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) };
    await new Promise<void>((resolve, reject) => {
      const req = httpsRequest(
        `${cluster.server}${path}`,
        { method: 'PUT', agent, auth: applied.auth, headers, signal: AbortSignal.timeout(timeoutMs) },
        (res) => {
          const code = res.statusCode ?? 0;
          res.on('error', reject);
          if (code >= 200 && code < 300) {
            res.on('end', resolve).resume();
            return;
          }
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            if (text.length < ERROR_BODY_MAX) text += chunk;
          });
          res.on('end', () => reject(new KubernetesApiError(code, `PUT ${path}: HTTP ${code}: ${apiserverMessage(text)}`)));
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  };
}

/** The message of an apiserver Status object, else the start of the text. */
function apiserverMessage(text: string): string {
  try {
    const message = (JSON.parse(text) as { message?: unknown }).message;
    if (typeof message === 'string') return message;
  } catch {}
  return text.slice(0, 200);
}

/** Where a status goes: a custom resource's status subresource, namespaced unless `namespace` is absent. */
export interface StatusTarget {
  group: string;
  version: string;
  plural: string;
  namespace?: string;
  name: string;
}

/** Replaces the status of `current` (as cached: its resourceVersion is the precondition, a 409 when stale). */
export type StatusWriter = (target: StatusTarget, current: KubernetesObject, status: Record<string, unknown>) => Promise<void>;

/**
 * The status writes of the store and the Gateway API controller: jsonPutter's PUT, client-node's replace call on an
 * apiserver on plain HTTP. The status and what identifies the object only: the apiserver takes nothing else of a
 * status write (it keeps the stored spec and metadata), so the spec and annotations are not sent back.
 */
export function statusWriter(kubeConfig: KubeConfig, timeoutMs: number, limiter?: RateLimiter): StatusWriter {
  const putJson = jsonPutter(kubeConfig, timeoutMs, limiter);
  const api = putJson ? undefined : customObjectsApi(kubeConfig, timeoutMs, limiter);
  return async (target, current, status) => {
    const { name, namespace, uid, resourceVersion } = current.metadata ?? {};
    const body = { apiVersion: current.apiVersion, kind: current.kind, metadata: { name, namespace, uid, resourceVersion }, status };
    if (putJson) {
      const scope = target.namespace === undefined ? '' : `/namespaces/${encodeURIComponent(target.namespace)}`;
      await putJson(`/apis/${target.group}/${target.version}${scope}/${target.plural}/${encodeURIComponent(target.name)}/status`, body);
    } else if (target.namespace === undefined) await api!.replaceClusterCustomObjectStatus({ ...target, body });
    else await api!.replaceNamespacedCustomObjectStatus({ ...target, namespace: target.namespace, body });
  };
}
