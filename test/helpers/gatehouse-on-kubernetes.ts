/**
 * What the Kubernetes-store tests set up on a real apiserver (test/helpers/kube-apiserver.ts):
 * the CRDs from deploy/crds (waited for until Established), a namespace, and the control plane's
 * identity: a ServiceAccount bound to exactly deploy/rbac/role.yaml, with a kubeconfig for its token.
 */
import { readFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CustomObjectsApi, KubeConfig, KubernetesObjectApi, loadYaml, type KubernetesObject } from '@kubernetes/client-node';
import { pollUntil } from './poll-until.js';
import type { KubeApiServer } from './kube-apiserver.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export const CRD_FILES = [
  'deploy/crds/gatehouse.dev_apidefinitions.yaml',
  'deploy/crds/gatehouse.dev_oauthservers.yaml',
  'deploy/crds/gatehouse.dev_basicauthcredentials.yaml',
  'deploy/crds/gatehouse.dev_keyauthcredentials.yaml',
];
export const ROLE_FILE = 'deploy/rbac/role.yaml';

export interface KubeClients {
  kubeconfig: string;
  config: KubeConfig;
  objects: KubernetesObjectApi;
  custom: CustomObjectsApi;
}

export async function kubeClients(kubeconfig: string): Promise<KubeClients> {
  const config = new KubeConfig();
  config.loadFromFile(kubeconfig);
  return { kubeconfig, config, objects: KubernetesObjectApi.makeApiClient(config), custom: config.makeApiClient(CustomObjectsApi) };
}

export async function readManifest<T = KubernetesObject>(path: string): Promise<T> {
  return loadYaml<T>(await readFile(join(root, path), 'utf8'));
}

/** kubectl apply, for objects that do not exist yet (create; AlreadyExists is fine). */
export async function createObject(admin: KubeClients, object: KubernetesObject): Promise<void> {
  try {
    await admin.objects.create(object);
  } catch (err) {
    if ((err as { code?: number }).code !== 409) throw err;
  }
}

export async function installCrds(admin: KubeClients): Promise<void> {
  for (const file of CRD_FILES) {
    const crd = await readManifest(file);
    await createObject(admin, crd);
    await pollUntil(
      async () => {
        const got = (await admin.objects.read({
          apiVersion: 'apiextensions.k8s.io/v1',
          kind: 'CustomResourceDefinition',
          metadata: { name: crd.metadata!.name! },
        })) as {
          status?: { conditions?: Array<{ type: string; status: string }> };
        };
        return got.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') ? true : undefined;
      },
      { what: `CRD ${crd.metadata!.name} Established`, timeoutMs: 30_000, intervalMs: 200 },
    );
  }
}

/**
 * Namespace + ServiceAccount `gatehouse-control-plane` + the Role of deploy/rbac/role.yaml + its
 * RoleBinding; returns a kubeconfig holding that ServiceAccount's token (and nothing more).
 */
export async function controlPlaneIdentity(server: KubeApiServer, admin: KubeClients, namespace: string): Promise<KubeClients> {
  await createObject(admin, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
  const role = await readManifest(ROLE_FILE);
  await createObject(admin, { ...role, metadata: { ...role.metadata, namespace } });
  await createObject(admin, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'gatehouse-control-plane', namespace },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role.metadata!.name! },
    subjects: [{ kind: 'ServiceAccount', name: 'gatehouse-control-plane', namespace }],
  } as KubernetesObject);
  const token = await server.serviceAccountToken(namespace, 'gatehouse-control-plane');
  return kubeClients(await server.writeKubeconfig(token, undefined, namespace));
}
