/**
 * The Helm chart's wiring end to end, on a real kube-apiserver (no kubelet here): after a real
 * `helm install`, each Deployment is read back from the apiserver and its container is run as a
 * process exactly as the chart specifies it (test/helpers/pod-process.ts: args, env resolved from
 * the apiserver's Secrets and the Downward API, Secret volumes as files, ports), the control plane
 * with a token of the chart's ServiceAccount (bound to the chart's Role) instead of the in-cluster
 * config. Then: probes answer on the chart's paths and ports, log in with the password from the
 * chart's Secret, create an API through the admin REST API and as a custom resource, and call both
 * through two data planes that reached the CP through its Service over the chart's mutual TLS.
 * A wrong env var name, port, path or secret key in the chart makes this fail.
 */
import type { KubernetesObject, V1Deployment } from '@kubernetes/client-node';
import { createAdminClient, type AdminClient } from '../helpers/admin-client.js';
import { apiDefinition } from '../helpers/api-definition.js';
import { decodeSecretValue, servicePortTarget, type AnyObject } from '../helpers/chart-objects.js';
import { kubeClients, type KubeClients } from '../helpers/gatehouse-on-kubernetes.js';
import { CHART_DIR, helmOk } from '../helpers/helm.js';
import { httpRequest } from '../helpers/http-request.js';
import { startKubeApiServer, type KubeApiServer } from '../helpers/kube-apiserver.js';
import { podNameFor, startPodProcess, type PodProcess } from '../helpers/pod-process.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

const T = 120_000;
const RELEASE = 'gh';
const NS = 'gatehouse';

let server: KubeApiServer;
let admin: KubeClients;
let upstream: Upstream;
let cpDeployment: V1Deployment & AnyObject;
let dpDeployment: V1Deployment & AnyObject;
let cp: PodProcess;
const dps: PodProcess[] = [];
let client: AdminClient;

async function read(apiVersion: string, kind: string, name: string): Promise<AnyObject> {
  return (await admin.objects.read({ apiVersion, kind, metadata: { name, namespace: NS } })) as AnyObject;
}

/** The release's Deployment of one component, as stored by the apiserver. */
async function deployment(component: string): Promise<V1Deployment & AnyObject> {
  const list = (await admin.objects.list(
    'apps/v1',
    'Deployment',
    NS,
    undefined,
    undefined,
    undefined,
    undefined,
    `app.kubernetes.io/instance=${RELEASE},app.kubernetes.io/component=${component}`,
  )) as {
    items: Array<V1Deployment & AnyObject>;
  };
  if (list.items.length !== 1) throw new Error(`expected one ${component} Deployment of release ${RELEASE}, found ${list.items.length}`);
  return { apiVersion: 'apps/v1', kind: 'Deployment', ...list.items[0] };
}

/** A URL reaching `pod` through the chart's Service `serviceName` on its port `port`. */
async function viaService(serviceName: string, port: number, pod: PodProcess): Promise<string> {
  const service = await read('v1', 'Service', serviceName);
  const containerPort = servicePortTarget(service, port, pod.container);
  return `http://127.0.0.1:${pod.hostPort(containerPort)}`;
}

const logs = (): string =>
  [cp, ...dps]
    .filter(Boolean)
    .map((p) => p.process.recentLogs(30))
    .join('\n');

async function served(dp: PodProcess, path: string): Promise<void> {
  const base = await viaService(dpDeployment.metadata!.name!, 80, dp);
  await pollUntil(
    async () => {
      const res = await httpRequest(`${base}${path}`);
      return res.status === 200 && res.headers['x-upstream'] === upstream.name ? true : undefined;
    },
    { what: `${dp.podName} serving ${path}`, timeoutMs: 20_000, details: logs },
  );
}

beforeAll(async () => {
  server = await startKubeApiServer();
  admin = await kubeClients(await server.writeKubeconfig(server.adminToken));
  await admin.objects.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  await helmOk(['install', RELEASE, CHART_DIR, '--kubeconfig', admin.kubeconfig, '--namespace', NS]);
  upstream = await startUpstream('chart-upstream');
  cpDeployment = await deployment('control-plane');
  dpDeployment = await deployment('data-plane');
  cp = await startPodProcess({ server, admin, deployment: cpDeployment, podName: podNameFor(cpDeployment), listeners: ['admin', 'grpc'], running: [] });
  for (let i = 0; i < 2; i++) {
    dps.push(
      await startPodProcess({ server, admin, deployment: dpDeployment, podName: podNameFor(dpDeployment), listeners: ['proxy', 'status'], running: [cp] }),
    );
  }
  // Logged in with the password from the chart's Secret (createAdminClient logs in): every admin test uses it, in any order.
  const secret = await read('v1', 'Secret', `${RELEASE}-gatehouse-admin`);
  const adminUrl = await viaService(cpDeployment.metadata!.name!, 8081, cp);
  client = await createAdminClient({ adminUrl, username: 'admin', password: decodeSecretValue(secret, 'password') });
}, T);

afterAll(async () => {
  const statuses = [];
  for (const p of [...dps, cp]) {
    if (!p) continue;
    statuses.push({ pod: p.podName, code: (await p.stop()).code });
    await p.dispose();
  }
  await upstream?.close();
  await server?.stop();
  // SIGTERM → graceful exit 0, as the kubelet would ask.
  expect(statuses.filter((s) => s.code !== 0)).toEqual([]);
}, T);

test('the processes got what the chart says: STORE=kubernetes, TLS files from the mounted Secrets, a Service address', () => {
  expect(cp.env.STORE).toBe('kubernetes');
  expect(cp.env.POD_NAME).toBe(cp.podName);
  expect(cp.env.GATEHOUSE_NAMESPACE).toBe(NS);
  for (const p of [cp, ...dps]) {
    // The chart's mount path, rewritten to the pod's temporary directory: the files are the Secret's.
    const tlsDir = p.mounts.get(p.container.volumeMounts!.find((m) => m.name === 'grpc-tls')!.mountPath)!;
    for (const name of ['GRPC_TLS_CERT', 'GRPC_TLS_KEY', 'GRPC_TLS_CA']) expect(p.env[name].startsWith(`${tlsDir}/`)).toBe(true);
  }
  for (const dp of dps) {
    expect(dp.env.CONTROL_PLANE_ADDR).toBe(`127.0.0.1:${cp.hostPort('grpc')}`);
    expect(dp.env.GRPC_TLS_SERVER_NAME).toBe(`${cpDeployment.metadata!.name}.${NS}.svc.cluster.local`);
    expect(dp.env.KUBECONFIG).toBeUndefined();
  }
  const grpcListening = cp.process.lines().find((l) => l.json?.msg === 'listening' && l.json.listener === 'grpc');
  expect(grpcListening?.json?.tls).toBe(true);
});

test(
  'liveness and readiness probes answer 200 on the paths and ports the chart gives',
  async () => {
    for (const p of [cp, ...dps]) {
      for (const probe of [p.container.livenessProbe!, p.container.readinessProbe!]) {
        const url = `http://127.0.0.1:${p.hostPort(probe.httpGet!.port as string)}${probe.httpGet!.path}`;
        await pollUntil(async () => ((await httpRequest(url)).status === 200 ? true : undefined), {
          what: `${p.podName} ${url} → 200`,
          timeoutMs: 20_000,
          details: logs,
        });
      }
      // The Prometheus annotations point at a real /metrics.
      const annotations = (p === cp ? cpDeployment : dpDeployment).spec!.template.metadata!.annotations!;
      const metrics = await httpRequest(`http://127.0.0.1:${p.hostPort(Number(annotations['prometheus.io/port']))}${annotations['prometheus.io/path']}`);
      expect(metrics.status).toBe(200);
      expect(metrics.text).toContain('gatehouse_snapshot_version');
    }
  },
  T,
);

test(
  'log in with the password from the chart’s Secret; both data planes are connected, named by their pods',
  async () => {
    const refused = await client.login('admin', 'not-the-password');
    expect(refused.status).toBe(401);
    expect((await client.login()).status).toBe(200);
    await pollUntil(
      async () => {
        const ids = ((await client.dataplanes()).body as Array<{ id: string }>).map((d) => d.id).sort();
        return JSON.stringify(ids) === JSON.stringify(dps.map((d) => d.podName).sort()) ? true : undefined;
      },
      { what: 'GET /dataplanes to list both data-plane pods', timeoutMs: 20_000, details: logs },
    );
  },
  T,
);

test(
  'the control plane holds the chart’s Lease under its pod name (leader election, Downward API)',
  async () => {
    const lease = await pollUntil(
      async () => {
        try {
          const l = await read('coordination.k8s.io/v1', 'Lease', cp.env.LEASE_NAME);
          return l.spec?.holderIdentity ? l : undefined;
        } catch {
          return undefined;
        }
      },
      { what: `Lease ${cp.env.LEASE_NAME} held`, timeoutMs: 30_000, details: logs },
    );
    expect(lease.spec.holderIdentity).toBe(cp.podName);
  },
  T,
);

test(
  'an API created through the admin REST API is served by both data planes (through the chart’s mTLS)',
  async () => {
    const created = await client.createApi(apiDefinition({ name: 'orders', listenPath: '/orders/*', stripPath: true, targets: [upstream.url] }));
    expect(created.status).toBe(201);
    for (const dp of dps) await served(dp, '/orders/42');
    // It is a custom resource in the release's namespace.
    const cr = await read('gatehouse.dev/v1alpha1', 'ApiDefinition', 'orders');
    expect(cr.spec.proxy.listen_path).toBe('/orders/*');
  },
  T,
);

test(
  'an ApiDefinition applied with the Kubernetes API is served too and gets Accepted/Programmed status',
  async () => {
    await admin.objects.create({
      apiVersion: 'gatehouse.dev/v1alpha1',
      kind: 'ApiDefinition',
      metadata: { name: 'payments', namespace: NS },
      spec: { proxy: { listen_path: '/payments/*', strip_path: true, upstreams: { targets: [{ target: upstream.url }] } } },
    } as KubernetesObject);
    for (const dp of dps) await served(dp, '/payments/7');
    const conditions = await pollUntil(
      async () => {
        const cr = await read('gatehouse.dev/v1alpha1', 'ApiDefinition', 'payments');
        const byType = Object.fromEntries((cr.status?.conditions ?? []).map((c: any) => [c.type, c.status]));
        return byType.Accepted === 'True' && byType.Programmed === 'True' ? byType : undefined;
      },
      { what: 'payments Accepted=True and Programmed=True', timeoutMs: 30_000, intervalMs: 200, details: logs },
    );
    expect(conditions).toEqual({ Accepted: 'True', Programmed: 'True' });
  },
  T,
);
