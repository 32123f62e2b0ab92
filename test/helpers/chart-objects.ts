/**
 * Reading rendered (or installed) Kubernetes objects the way the cluster would: find objects,
 * the pod templates of workloads, what a pod references (Secrets, ConfigMaps, ports by name) and
 * what a value set provides (Secrets, including those cert-manager Certificates will write).
 */
import type { KubernetesObject, V1Container, V1Deployment, V1PodSpec, V1Service } from '@kubernetes/client-node';

export type AnyObject = KubernetesObject & Record<string, any>;

export function ofKind(objects: readonly KubernetesObject[], kind: string): AnyObject[] {
  return objects.filter((o) => o.kind === kind) as AnyObject[];
}

/** The one object of `kind` (named `name` when given); throws listing what there is. */
export function one(objects: readonly KubernetesObject[], kind: string, name?: string): AnyObject {
  const found = ofKind(objects, kind).filter((o) => name === undefined || o.metadata?.name === name);
  if (found.length !== 1) {
    const all = objects.map((o) => `${o.kind}/${o.metadata?.name}`).join(', ');
    throw new Error(`expected one ${kind}${name ? ` named ${name}` : ''}, found ${found.length} (objects: ${all})`);
  }
  return found[0];
}

/** The Deployment whose pods carry `app.kubernetes.io/component: <component>`. */
export function deploymentOf(objects: readonly KubernetesObject[], component: 'control-plane' | 'data-plane'): V1Deployment & AnyObject {
  const found = ofKind(objects, 'Deployment').filter((d) => d.spec?.template?.metadata?.labels?.['app.kubernetes.io/component'] === component);
  if (found.length !== 1) throw new Error(`expected one ${component} Deployment, found ${found.length}`);
  return found[0] as V1Deployment & AnyObject;
}

export function podSpecOf(deployment: V1Deployment): V1PodSpec {
  const spec = deployment.spec?.template?.spec;
  if (!spec) throw new Error(`Deployment ${deployment.metadata?.name} has no pod template spec`);
  return spec;
}

export function onlyContainer(deployment: V1Deployment): V1Container {
  const containers = podSpecOf(deployment).containers;
  if (containers.length !== 1) throw new Error(`Deployment ${deployment.metadata?.name} has ${containers.length} containers, expected 1`);
  return containers[0];
}

/** Plain `value` of an env var (undefined when absent or from valueFrom). */
export function envValue(container: V1Container, name: string): string | undefined {
  return container.env?.find((e) => e.name === name)?.value;
}

export function envVar(container: V1Container, name: string) {
  const found = container.env?.filter((e) => e.name === name) ?? [];
  if (found.length !== 1) throw new Error(`container ${container.name}: expected one env var ${name}, found ${found.length}`);
  return found[0];
}

/** containerPort of a port given by number or by name (as probes and Services give it). */
export function containerPort(container: V1Container, port: number | string): number {
  if (typeof port === 'number') return port;
  if (/^\d+$/.test(port)) return Number(port);
  const found = container.ports?.find((p) => p.name === port);
  if (!found) throw new Error(`container ${container.name} has no port named ${port}`);
  return found.containerPort;
}

/** True when every selector label is on the labels. */
export function selects(selector: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean {
  if (!selector || Object.keys(selector).length === 0) return false;
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v);
}

/** The Deployments whose pod templates a Service/PDB selector matches. */
export function selectedDeployments(objects: readonly KubernetesObject[], selector: Record<string, string> | undefined): AnyObject[] {
  return ofKind(objects, 'Deployment').filter((d) => selects(selector, d.spec?.template?.metadata?.labels));
}

export interface SecretRef {
  name: string;
  /** Keys the pod needs in it (env secretKeyRef keys, volume items); empty = the whole Secret. */
  keys: string[];
  where: string;
}

/** Every Secret (and ConfigMap) a pod spec references, with the keys it needs. */
export function referencedConfig(spec: V1PodSpec): { secrets: SecretRef[]; configMaps: SecretRef[] } {
  const secrets: SecretRef[] = [];
  const configMaps: SecretRef[] = [];
  for (const volume of spec.volumes ?? []) {
    if (volume.secret) secrets.push({ name: volume.secret.secretName!, keys: (volume.secret.items ?? []).map((i) => i.key), where: `volume ${volume.name}` });
    if (volume.configMap)
      configMaps.push({ name: volume.configMap.name!, keys: (volume.configMap.items ?? []).map((i) => i.key), where: `volume ${volume.name}` });
    for (const source of volume.projected?.sources ?? []) {
      if (source.secret)
        secrets.push({ name: source.secret.name!, keys: (source.secret.items ?? []).map((i) => i.key), where: `projected volume ${volume.name}` });
      if (source.configMap)
        configMaps.push({ name: source.configMap.name!, keys: (source.configMap.items ?? []).map((i) => i.key), where: `projected volume ${volume.name}` });
    }
  }
  for (const container of [...(spec.initContainers ?? []), ...spec.containers]) {
    for (const env of container.env ?? []) {
      const s = env.valueFrom?.secretKeyRef;
      if (s) secrets.push({ name: s.name!, keys: [s.key], where: `${container.name} env ${env.name}` });
      const c = env.valueFrom?.configMapKeyRef;
      if (c) configMaps.push({ name: c.name!, keys: [c.key], where: `${container.name} env ${env.name}` });
    }
    for (const from of container.envFrom ?? []) {
      if (from.secretRef) secrets.push({ name: from.secretRef.name!, keys: [], where: `${container.name} envFrom` });
      if (from.configMapRef) configMaps.push({ name: from.configMapRef.name!, keys: [], where: `${container.name} envFrom` });
    }
  }
  return { secrets, configMaps };
}

/**
 * Secrets a render provides: Secret objects with their keys, and the Secrets cert-manager
 * Certificates will write (tls.crt, tls.key, ca.crt).
 */
export function providedSecrets(objects: readonly KubernetesObject[]): Map<string, string[]> {
  const provided = new Map<string, string[]>();
  for (const secret of ofKind(objects, 'Secret')) {
    provided.set(secret.metadata!.name!, [...Object.keys(secret.data ?? {}), ...Object.keys(secret.stringData ?? {})]);
  }
  for (const certificate of ofKind(objects, 'Certificate')) {
    provided.set(certificate.spec.secretName, ['tls.crt', 'tls.key', 'ca.crt']);
  }
  return provided;
}

/** The Service port named or numbered `port`, and the container port it forwards to in `container`. */
export function servicePortTarget(service: V1Service, port: number, container: V1Container): number {
  const sp = service.spec?.ports?.find((p) => p.port === port);
  if (!sp) throw new Error(`Service ${service.metadata?.name} has no port ${port} (ports: ${JSON.stringify(service.spec?.ports)})`);
  return containerPort(container, (sp.targetPort ?? sp.port) as number | string);
}

export function decodeSecretValue(secret: AnyObject, key: string): string {
  const value = secret.data?.[key];
  if (typeof value !== 'string') throw new Error(`Secret ${secret.metadata?.name} has no key ${key} (keys: ${Object.keys(secret.data ?? {}).join(', ')})`);
  return Buffer.from(value, 'base64').toString('utf8');
}
