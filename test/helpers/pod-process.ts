/**
 * Runs a Deployment's container as a local process, the way a kubelet would start the pod, but
 * without a kubelet: the container's args, its env with `valueFrom` resolved against the real
 * apiserver (secretKeyRef, configMapKeyRef, fieldRef from the made-up pod) and `$(VAR)` expanded,
 * its Secret / ConfigMap / emptyDir volumes written to temporary directories, and its ports.
 *
 * The only rewriting (what a node would give a pod and a test host cannot):
 *  - an absolute mount path, in a value that starts with it, becomes that mount's temporary dir;
 *  - every containerPort becomes a free loopback port: the env value equal to that port number is
 *    replaced (a containerPort no env var sets is an error: the process would not listen there);
 *  - `<service>.<namespace>.svc[.<domain>]:<port>` becomes 127.0.0.1 and the host port of the
 *    running pod that Service selects, through its targetPort (Service and port must exist); the
 *    original host goes to GRPC_TLS_SERVER_NAME so the CP certificate is checked against it;
 *  - the in-cluster service account becomes KUBECONFIG with a token of the pod's ServiceAccount
 *    (none when automountServiceAccountToken is false).
 * Anything else the pod spec asks for and this cannot honour (subPath, other volume types,
 * resourceFieldRef, a command that is not `node [--flag ...] <script>`) throws, naming it.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubernetesObject, V1Container, V1Deployment, V1EnvVar, V1PodSpec, V1Service } from '@kubernetes/client-node';
import { containerPort, selects } from './chart-objects.js';
import { freePort } from './free-port.js';
import type { KubeClients } from './gatehouse-on-kubernetes.js';
import type { KubeApiServer } from './kube-apiserver.js';
import { spawnService, type ServiceProcess } from './service-process.js';

export interface PodProcess {
  podName: string;
  namespace: string;
  labels: Record<string, string>;
  container: V1Container;
  /** containerPort → loopback port on this host. */
  hostPorts: Map<number, number>;
  /** The environment the process got (after resolution and rewriting). */
  env: Record<string, string>;
  /** mountPath → temporary directory. */
  mounts: Map<string, string>;
  process: ServiceProcess;
  /** Host port of a container port given by name or number (as probes and Services give it). */
  hostPort(port: number | string): number;
  stop(): ReturnType<ServiceProcess['stop']>;
  dispose(): Promise<void>;
}

export interface StartPodOptions {
  server: KubeApiServer;
  /** Cluster-admin clients (read Secrets, ConfigMaps, Services). */
  admin: KubeClients;
  deployment: V1Deployment;
  podName: string;
  /** Listener names the process logs (process contract), awaited before resolving. */
  listeners: readonly string[];
  /** Pods already running: targets for Service addresses in the env. */
  running: readonly PodProcess[];
}

type AnyObject = KubernetesObject & Record<string, any>;

async function readObject(admin: KubeClients, apiVersion: string, kind: string, name: string, namespace: string): Promise<AnyObject | undefined> {
  try {
    return (await admin.objects.read({ apiVersion, kind, metadata: { name, namespace } })) as AnyObject;
  } catch (err) {
    if ((err as { code?: number }).code === 404) return undefined;
    throw err;
  }
}

function decode(data: Record<string, string> | undefined, binary = true): Record<string, Buffer> {
  return Object.fromEntries(Object.entries(data ?? {}).map(([k, v]) => [k, binary ? Buffer.from(v, 'base64') : Buffer.from(v, 'utf8')]));
}

/** Data of a Secret (base64-decoded) or ConfigMap; throws when it does not exist (unless optional). */
async function configData(
  admin: KubeClients,
  kind: 'Secret' | 'ConfigMap',
  name: string,
  namespace: string,
  optional: boolean | undefined,
): Promise<Record<string, Buffer> | undefined> {
  const object = await readObject(admin, 'v1', kind, name, namespace);
  if (!object) {
    if (optional) return undefined;
    throw new Error(`${kind} ${namespace}/${name} referenced by the pod does not exist`);
  }
  return kind === 'Secret' ? decode(object.data) : { ...decode(object.data, false), ...decode(object.binaryData) };
}

function fieldRef(
  path: string,
  pod: { name: string; namespace: string; spec: V1PodSpec; labels: Record<string, string>; annotations: Record<string, string> },
): string {
  const label = /^metadata\.labels\['(.+)'\]$/.exec(path);
  if (label) return pod.labels[label[1]] ?? '';
  const annotation = /^metadata\.annotations\['(.+)'\]$/.exec(path);
  if (annotation) return pod.annotations[annotation[1]] ?? '';
  switch (path) {
    case 'metadata.name':
      return pod.name;
    case 'metadata.namespace':
      return pod.namespace;
    case 'spec.serviceAccountName':
      return pod.spec.serviceAccountName ?? 'default';
    case 'spec.nodeName':
      return 'test-node';
    case 'status.podIP':
    case 'status.hostIP':
      return '127.0.0.1';
    default:
      throw new Error(`fieldRef ${path} is not supported by the test pod runner`);
  }
}

/** Kubernetes `$(VAR)` expansion against the variables defined so far; `$$(` escapes. */
function expand(value: string, defined: Record<string, string>): string {
  return value.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (whole, name?: string) => {
    if (whole === '$$') return '$';
    return name !== undefined && name in defined ? defined[name] : whole;
  });
}

const SERVICE_ADDRESS = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc(\.[a-z0-9.-]+)?:(\d+)$/;

export async function startPodProcess(options: StartPodOptions): Promise<PodProcess> {
  const { admin, server, deployment, podName, running } = options;
  const namespace = deployment.metadata!.namespace!;
  const template = deployment.spec!.template;
  const spec = template.spec!;
  const labels = template.metadata?.labels ?? {};
  if (spec.containers.length !== 1) throw new Error(`${deployment.metadata!.name}: ${spec.containers.length} containers; the runner starts one`);
  if (spec.initContainers?.length) throw new Error(`${deployment.metadata!.name}: init containers are not supported`);
  const container = spec.containers[0];
  const dir = await mkdtemp(join(tmpdir(), `gatehouse-pod-${podName}-`));
  const cleanup = () => rm(dir, { recursive: true, force: true });
  try {
    // --- command: the image's ENTRYPOINT (tini) stays; args must be `node [--flag ...] <script>` ---
    if (container.command !== undefined)
      throw new Error(`${container.name}: command ${JSON.stringify(container.command)} overrides the image ENTRYPOINT; expected args only`);
    const args = container.args ?? [];
    const nodeFlags = args.slice(1, -1);
    if (args.length < 2 || args[0] !== 'node' || !nodeFlags.every((flag) => flag.startsWith('--'))) {
      throw new Error(`${container.name}: args ${JSON.stringify(args)}, expected ["node", "--flag", ..., "<script>"]`);
    }

    // --- volumes → temporary directories ---
    const mounts = new Map<string, string>();
    let n = 0;
    for (const mount of container.volumeMounts ?? []) {
      if (mount.subPath || mount.subPathExpr) throw new Error(`${container.name}: volumeMount ${mount.name} uses subPath (not supported)`);
      const volume = spec.volumes?.find((v) => v.name === mount.name);
      if (!volume) throw new Error(`${container.name}: volumeMount ${mount.name} names no volume of the pod`);
      const target = join(dir, `mount-${n++}-${mount.name}`);
      await mkdir(target, { recursive: true });
      if (volume.emptyDir) {
        // nothing to write
      } else if (volume.secret || volume.configMap) {
        const kind = volume.secret ? 'Secret' : 'ConfigMap';
        const name = volume.secret ? volume.secret.secretName! : volume.configMap!.name!;
        const source = volume.secret ?? volume.configMap!;
        const data = await configData(admin, kind, name, namespace, source.optional);
        const items = source.items ?? Object.keys(data ?? {}).map((key) => ({ key, path: key, mode: undefined as number | undefined }));
        for (const item of items) {
          const content = data?.[item.key];
          if (content === undefined) throw new Error(`${kind} ${name} has no key ${item.key} (volume ${volume.name})`);
          const file = join(target, item.path);
          await writeFile(file, content);
          // The owner is this test user, so keep the owner's read bit whatever the mode says.
          await chmod(file, (item.mode ?? source.defaultMode ?? 0o644) | 0o400);
        }
      } else {
        throw new Error(`${container.name}: volume ${volume.name} has a type the runner does not support`);
      }
      mounts.set(mount.mountPath, target);
    }
    const rewritePath = (value: string): string => {
      for (const [mountPath, target] of mounts) {
        if (value === mountPath || value.startsWith(`${mountPath}/`)) return target + value.slice(mountPath.length);
      }
      return value;
    };

    // --- env: envFrom, then env (which wins), valueFrom resolved, $(VAR) expanded ---
    const pod = { name: podName, namespace, spec, labels, annotations: template.metadata?.annotations ?? {} };
    const env: Record<string, string> = {};
    for (const from of container.envFrom ?? []) {
      const ref = from.secretRef ?? from.configMapRef;
      const data = await configData(admin, from.secretRef ? 'Secret' : 'ConfigMap', ref!.name!, namespace, ref!.optional);
      for (const [k, v] of Object.entries(data ?? {})) env[`${from.prefix ?? ''}${k}`] = v.toString('utf8');
    }
    const resolve = async (e: V1EnvVar): Promise<string | undefined> => {
      if (e.valueFrom === undefined) return expand(e.value ?? '', env);
      const { secretKeyRef, configMapKeyRef, fieldRef: field, resourceFieldRef } = e.valueFrom;
      if (field) return fieldRef(field.fieldPath, pod);
      if (secretKeyRef || configMapKeyRef) {
        const ref = (secretKeyRef ?? configMapKeyRef)!;
        const data = await configData(admin, secretKeyRef ? 'Secret' : 'ConfigMap', ref.name!, namespace, ref.optional);
        const value = data?.[ref.key];
        if (value === undefined && !ref.optional) throw new Error(`env ${e.name}: ${secretKeyRef ? 'Secret' : 'ConfigMap'} ${ref.name} has no key ${ref.key}`);
        return value?.toString('utf8');
      }
      if (resourceFieldRef) throw new Error(`env ${e.name}: resourceFieldRef is not supported by the test pod runner`);
      throw new Error(`env ${e.name}: empty valueFrom`);
    };
    for (const e of container.env ?? []) {
      const value = await resolve(e);
      if (value !== undefined) env[e.name] = value;
    }

    // --- rewriting: mount paths, ports, Service addresses ---
    for (const [k, v] of Object.entries(env)) env[k] = rewritePath(v);
    const hostPorts = new Map<number, number>();
    for (const port of container.ports ?? []) {
      const setters = Object.keys(env).filter((k) => env[k] === String(port.containerPort));
      if (setters.length === 0) {
        throw new Error(`${container.name}: containerPort ${port.name ?? ''} ${port.containerPort} is set by no env var; the process would not listen there`);
      }
      const host = await freePort();
      hostPorts.set(port.containerPort, host);
      for (const k of setters) env[k] = String(host);
    }
    for (const [k, v] of Object.entries(env)) {
      const m = SERVICE_ADDRESS.exec(v);
      if (!m) continue;
      const [, serviceName, , serviceNamespace, , domain, portText] = m;
      if (domain !== undefined && domain !== '.cluster.local') throw new Error(`env ${k}: ${v} is outside the cluster domain cluster.local`);
      const service = (await readObject(admin, 'v1', 'Service', serviceName, serviceNamespace)) as (V1Service & AnyObject) | undefined;
      if (!service) throw new Error(`env ${k}: Service ${serviceNamespace}/${serviceName} does not exist`);
      const servicePort = service.spec?.ports?.find((p) => p.port === Number(portText));
      if (!servicePort) throw new Error(`env ${k}: Service ${serviceName} has no port ${portText}`);
      const backends = running.filter((p) => p.namespace === serviceNamespace && selects(service.spec?.selector, p.labels));
      if (backends.length === 0) throw new Error(`env ${k}: Service ${serviceName} selects none of the running pods`);
      const backend = backends[0];
      env[k] = `127.0.0.1:${backend.hostPort((servicePort.targetPort ?? servicePort.port) as number | string)}`;
      if (env.GRPC_TLS_CA !== undefined) env.GRPC_TLS_SERVER_NAME = v.slice(0, v.lastIndexOf(':'));
    }

    // --- the in-cluster service account → a kubeconfig with its token ---
    if (spec.automountServiceAccountToken !== false) {
      const token = await server.serviceAccountToken(namespace, spec.serviceAccountName ?? 'default');
      env.KUBECONFIG = await server.writeKubeconfig(token, join(dir, 'kubeconfig'));
    }

    const proc = await spawnService({ name: podName, script: args.at(-1)!, nodeFlags, env, listeners: options.listeners, startTimeoutMs: 30_000 });
    return {
      podName,
      namespace,
      labels,
      container,
      hostPorts,
      env,
      mounts,
      process: proc,
      hostPort(port) {
        const number = containerPort(container, port);
        const host = hostPorts.get(number);
        if (host === undefined) throw new Error(`${podName}: container port ${port} is not declared`);
        return host;
      },
      stop: () => proc.stop(),
      async dispose() {
        if (proc.running()) await proc.kill();
        await cleanup();
      },
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

/** A pod name like the ReplicaSet controller makes. */
export function podNameFor(deployment: V1Deployment): string {
  return `${deployment.metadata!.name}-${randomBytes(4).toString('hex').slice(0, 8)}-${randomBytes(3).toString('hex').slice(0, 5)}`;
}
