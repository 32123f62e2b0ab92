/**
 * Kubernetes service discovery's view of the cluster: per namespace a target names, one informer
 * (list + watch) on Services and one on EndpointSlices (`kubernetes.io/service-name`), started on first
 * use, so a control plane whose definitions name no Service sends the apiserver nothing. A watch that
 * fails is restarted with backoff; its cache, and so the served endpoints, are kept meanwhile.
 */
import {
  CoreV1Api,
  DiscoveryV1Api,
  makeInformer,
  type Informer,
  type KubeConfig,
  type KubernetesObject,
  type ObjectCache,
  type V1EndpointSlice,
  type V1Service,
} from '@kubernetes/client-node';
import type { ServiceTarget } from '#proto/compile/index';
import type { Logger } from '#proto/logger';
import { runInformer } from '../store/kubernetes/run-informer.js';

const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';
const RETRY_BASE_MS = 500;
const RETRY_MAX_MS = 10_000;

export interface Endpoint {
  ip: string;
  port: number;
}

export interface EndpointWatch {
  /** Namespaces a target may name: the control plane's own first. */
  readonly namespaces: readonly string[];
  /** Ready, non-terminating endpoints of `target` in `namespace` (sorted: every replica expands alike). */
  endpoints(namespace: string, target: ServiceTarget): Endpoint[];
  /** Starts watching `namespace` (once); `changed` then hears of every Service or EndpointSlice change there, by Service name. */
  watch(namespace: string): void;
  /** Resolves once every namespace watched so far has been listed (or after `timeoutMs`): a restarted CP must not serve its Services empty. */
  ready(timeoutMs: number): Promise<void>;
  close(): void;
}

type Cached<T extends KubernetesObject> = Informer<T> & ObjectCache<T>;

export function createEndpointWatch(deps: {
  kubeConfig: KubeConfig;
  namespaces: readonly string[];
  changed(namespace: string, service: string): void;
  logger: Logger;
}): EndpointWatch {
  const core = deps.kubeConfig.makeApiClient(CoreV1Api);
  const discovery = deps.kubeConfig.makeApiClient(DiscoveryV1Api);
  const watched = new Map<string, { services: Cached<V1Service>; slices: Cached<V1EndpointSlice> }>();
  const timers = new Set<NodeJS.Timeout>();
  const firstLists: Promise<unknown>[] = [];
  let closed = false;

  function run<T extends KubernetesObject>(informer: Cached<T>, namespace: string, kind: string, nameOf: (obj: T) => string | undefined): void {
    const changed = (obj: T) => {
      const name = nameOf(obj);
      if (name) deps.changed(namespace, name);
    };
    const failed = (err: unknown, retryMs: number) => deps.logger.warn({ err, namespace, kind, retryMs }, 'service discovery list/watch failed; retrying');
    firstLists.push(runInformer(informer, changed, { baseMs: RETRY_BASE_MS, maxMs: RETRY_MAX_MS, timers, closed: () => closed, failed }));
  }

  function endpoints(namespace: string, target: ServiceTarget): Endpoint[] {
    const w = watched.get(namespace);
    if (!w) return [];
    // A slice's ports carry the Service port's name, and the pods' port number: a number names the Service port.
    let portName: string = typeof target.port === 'string' ? target.port : '';
    if (typeof target.port === 'number') {
      const port = w.services.get(target.name, namespace)?.spec?.ports?.find((p) => p.port === target.port);
      if (!port) return [];
      portName = port.name ?? '';
    }
    const slices = w.slices.list(namespace).filter((slice) => slice.metadata?.labels?.[SERVICE_NAME_LABEL] === target.name);
    // A dual-stack Service has a slice per family, each listing every pod: one family, IPv4 when there is one.
    const family = slices.some((slice) => slice.addressType === 'IPv4') ? 'IPv4' : 'IPv6';
    const out = new Map<string, Endpoint>();
    for (const slice of slices) {
      if (slice.addressType !== family) continue;
      const port = slice.ports?.find((p) => (p.name ?? '') === portName)?.port;
      if (!port) continue;
      for (const endpoint of slice.endpoints ?? []) {
        if (endpoint.conditions?.ready === false || endpoint.conditions?.terminating === true) continue;
        // The addresses of one endpoint are one pod's, "fungible" (the API's word): one target per pod.
        const ip = endpoint.addresses?.[0];
        if (ip) out.set(`${ip} ${port}`, { ip, port });
      }
    }
    return [...out.values()].sort((a, b) => (a.ip < b.ip ? -1 : a.ip > b.ip ? 1 : a.port - b.port));
  }

  return {
    namespaces: deps.namespaces,
    endpoints,
    watch(namespace) {
      if (closed || watched.has(namespace)) return;
      const services = makeInformer<V1Service>(deps.kubeConfig, `/api/v1/namespaces/${namespace}/services`, () => core.listNamespacedService({ namespace }));
      const slices = makeInformer<V1EndpointSlice>(
        deps.kubeConfig,
        `/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices`,
        () => discovery.listNamespacedEndpointSlice({ namespace, labelSelector: SERVICE_NAME_LABEL }),
        SERVICE_NAME_LABEL,
      );
      watched.set(namespace, { services, slices });
      run(services, namespace, 'Service', (s) => s.metadata?.name);
      run(slices, namespace, 'EndpointSlice', (s) => s.metadata?.labels?.[SERVICE_NAME_LABEL]);
    },
    async ready(timeoutMs) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
      await Promise.race([Promise.all(firstLists), late]);
      clearTimeout(timer);
    },
    close() {
      closed = true;
      for (const timer of timers) clearTimeout(timer);
      for (const { services, slices } of watched.values()) {
        void services.stop();
        void slices.stop();
      }
    },
  };
}
