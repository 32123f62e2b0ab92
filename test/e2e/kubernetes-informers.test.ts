/**
 * The Kubernetes store's informers on a real kube-apiserver + etcd: what their caches keep of each
 * object, listed at start and delivered by the watch afterwards; and the status writes made from them.
 */
import { CoreV1Api } from '@kubernetes/client-node';
import { jest } from '@jest/globals';
import { createLogger } from '#proto/logger';
import { createObject, installCrds, kubeClients, type KubeClients } from '../helpers/gatehouse-on-kubernetes.js';
import { startKubeApiServer, type KubeApiServer } from '../helpers/kube-apiserver.js';
import { pollUntil } from '../helpers/poll-until.js';
import { customObjectsApi, kubernetesApi, statusWriter } from '../../control-plane/src/store/kubernetes/api-client.js';
import { startInformers, type StoreInformers } from '../../control-plane/src/store/kubernetes/informers.js';
import { KINDS, type CustomResource } from '../../control-plane/src/store/kubernetes/kinds.js';
import { writeStatus } from '../../control-plane/src/store/kubernetes/status.js';

jest.setTimeout(120_000);

const NAMESPACE = 'informers';
const APIS = { group: 'gatehouse.dev', version: 'v1alpha1', namespace: NAMESPACE, plural: 'apidefinitions' };
const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

let server: KubeApiServer;
let admin: KubeClients;

beforeAll(async () => {
  server = await startKubeApiServer();
  admin = await kubeClients(await server.writeKubeconfig(server.adminToken));
  await installCrds(admin);
  await createObject(admin, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } });
});

afterAll(async () => {
  await server?.stop();
});

const apiCr = (name: string) => ({
  apiVersion: 'gatehouse.dev/v1alpha1',
  kind: 'ApiDefinition',
  metadata: { name, namespace: NAMESPACE, annotations: { [LAST_APPLIED]: '{"applied":true}' } },
  spec: { proxy: { listen_path: `/${name}/*`, upstreams: { targets: [{ target: 'http://127.0.0.1:9' }] } } },
});

const secret = (name: string) => ({
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name, namespace: NAMESPACE },
  data: { key: Buffer.from(name).toString('base64') },
});

/** The store's informers on the test namespace, as the store starts them. */
function informersOfTheNamespace(closed: () => boolean): StoreInformers {
  return startInformers({
    kubeConfig: admin.config,
    namespace: NAMESPACE,
    api: customObjectsApi(admin.config, 10_000),
    core: kubernetesApi(admin.config, 10_000, CoreV1Api),
    logger: createLogger('control-plane', 'silent'),
    retryBaseMs: 500,
    events: { touched: () => {}, relisted: () => {}, secretChanged: () => {}, closed },
  });
}

test('the caches keep no managedFields of CRs and Secrets, listed or watched, and everything else of them', async () => {
  await admin.custom.createNamespacedCustomObject({ ...APIS, body: apiCr('listed') });
  await createObject(admin, secret('listed-secret'));
  let closed = false;
  const informers = informersOfTheNamespace(() => closed);
  try {
    await informers.synced();
    const apis = informers.crs(KINDS[0]);
    const onServer = (await admin.custom.getNamespacedCustomObject({ ...APIS, name: 'listed' })) as CustomResource;
    expect(onServer.metadata?.managedFields?.length).toBeGreaterThan(0);
    const { managedFields: _, ...rest } = onServer.metadata!;
    expect(apis.get('listed', NAMESPACE)).toEqual({ ...onServer, metadata: rest });
    expect(informers.lookupSecret('listed-secret')?.metadata?.managedFields).toBeUndefined();
    expect(informers.lookupSecret('listed-secret')?.data).toEqual(secret('listed-secret').data);

    // Watched: a new CR, a status write on the listed one (which adds a managedFields entry), a new Secret.
    await admin.custom.createNamespacedCustomObject({ ...APIS, body: apiCr('watched') });
    const status = {
      conditions: [{ type: 'Accepted', status: 'True', reason: 'Accepted', message: 'ok', observedGeneration: 1, lastTransitionTime: '2026-01-01T00:00:00Z' }],
    };
    await admin.custom.replaceNamespacedCustomObjectStatus({ ...APIS, name: 'listed', body: { ...onServer, status } });
    await createObject(admin, secret('watched-secret'));
    await pollUntil(
      async () => (apis.get('watched', NAMESPACE) && apis.get('listed', NAMESPACE)?.status && informers.lookupSecret('watched-secret') ? true : undefined),
      {
        what: 'the watch events in the caches',
      },
    );
    for (const name of ['listed', 'watched']) {
      const cached = apis.get(name, NAMESPACE)!;
      expect(cached.metadata?.managedFields).toBeUndefined();
      expect(cached.metadata?.annotations?.[LAST_APPLIED]).toBe('{"applied":true}');
      expect(cached.metadata?.resourceVersion).toBe(
        ((await admin.custom.getNamespacedCustomObject({ ...APIS, name })) as CustomResource).metadata?.resourceVersion,
      );
    }
    expect(apis.get('listed', NAMESPACE)?.status).toEqual(status);
    expect(informers.lookupSecret('watched-secret')?.metadata?.managedFields).toBeUndefined();
  } finally {
    closed = true;
    await informers.stop();
  }
});

test('a status write sends the status alone: the spec, labels and annotations stay, the status is replaced whole; from a stale resourceVersion it is a 409 that changes nothing', async () => {
  await admin.custom.createNamespacedCustomObject({
    ...APIS,
    body: { ...apiCr('status-only'), metadata: { ...apiCr('status-only').metadata, labels: { team: 'a' } } },
  });
  const condition = (reason: string) => ({
    type: 'Accepted',
    status: 'True',
    reason,
    message: 'ok',
    observedGeneration: 1,
    lastTransitionTime: '2026-01-01T00:00:00Z',
  });
  // A field this CP does not write (as status.dataPlanes of an earlier release): a status write drops it.
  const before = (await admin.custom.getNamespacedCustomObject({ ...APIS, name: 'status-only' })) as CustomResource;
  await admin.custom.replaceNamespacedCustomObjectStatus({
    ...APIS,
    name: 'status-only',
    body: { ...before, status: { conditions: [condition('Old')], dataPlanes: [] } },
  });
  let closed = false;
  const informers = informersOfTheNamespace(() => closed);
  const ctx = { write: statusWriter(admin.config, 10_000), namespace: NAMESPACE, informers };
  const cached = () => informers.crs(KINDS[0]).get('status-only', NAMESPACE);
  try {
    await informers.synced();
    await writeStatus(ctx, KINDS[0].resource, 'status-only', { conditions: [condition('New')] });
    const written = (await admin.custom.getNamespacedCustomObject({ ...APIS, name: 'status-only' })) as CustomResource;
    expect(written.status).toEqual({ conditions: [condition('New')] });
    expect(written.spec).toEqual(apiCr('status-only').spec);
    expect(written.metadata?.labels).toEqual({ team: 'a' });
    expect(written.metadata?.annotations?.[LAST_APPLIED]).toBe('{"applied":true}');
    expect(written.metadata?.generation).toBe(1);

    // The cache held still (informers stopped) while someone else changes the CR: the next write, from the
    // cached resourceVersion, is refused and changes nothing.
    await pollUntil(async () => (cached()!.metadata!.resourceVersion === written.metadata?.resourceVersion ? true : undefined), {
      what: 'the status write in the cache',
    });
    closed = true;
    await informers.stop();
    const changed = (await admin.custom.replaceNamespacedCustomObject({
      ...APIS,
      name: 'status-only',
      body: { ...written, metadata: { ...written.metadata, labels: { team: 'b' } } },
    })) as CustomResource;
    await expect(writeStatus(ctx, KINDS[0].resource, 'status-only', { conditions: [condition('Stale')] })).rejects.toMatchObject({
      code: 409,
      message: expect.stringMatching(/modified/),
    });
    const after = (await admin.custom.getNamespacedCustomObject({ ...APIS, name: 'status-only' })) as CustomResource;
    expect(after.metadata?.resourceVersion).toBe(changed.metadata?.resourceVersion);
    expect(after.status).toEqual({ conditions: [condition('New')] });
    await expect(writeStatus(ctx, KINDS[0].resource, 'gone', { conditions: [] })).rejects.toThrow(/resource is gone/);
  } finally {
    closed = true;
    await informers.stop();
  }
});
