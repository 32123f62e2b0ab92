/**
 * Gateway API HTTPRoutes and GRPCRoutes on a real kube-apiserver + etcd with the Gateway API v1.4.1 standard CRDs (fetched by
 * scripts/test-tools.sh; missing ones fail the run), a CP with GATEWAY_API=true and a token bound to exactly
 * deploy/rbac/role.yaml + deploy/rbac/gateway-api-role.yaml, a real DP, and real upstreams reached through
 * Services + EndpointSlices written as the endpoint controller would (as kubernetes-discovery.test.ts does);
 * a real @grpc/grpc-js server behind a GRPCRoute, called by a real grpc-js client over h2c.
 */
import * as grpc from '@grpc/grpc-js';
import { randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { request as httpsRequest } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { jest } from '@jest/globals';
import { loadAllYaml, PatchStrategy, type KubernetesObject, type V1Service } from '@kubernetes/client-node';
import { createAdminClient } from '../helpers/admin-client.js';
import { apiDefinition } from '../helpers/api-definition.js';
import { controlPlaneIdentity, createObject, installCrds, kubeClients, type KubeClients } from '../helpers/gatehouse-on-kubernetes.js';
import { KUBE_TOOLS_BIN, startKubeApiServer, type KubeApiServer } from '../helpers/kube-apiserver.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';
import { startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';
import { rawMethod } from '../helpers/grpc-raw.js';
import { createNamedCertificates, createTestCertificates, type NamedCertificates } from '../helpers/test-certificates.js';

jest.setTimeout(120_000);

const NAMESPACE = 'gatehouse';
const GATEWAY_CRDS = join(KUBE_TOOLS_BIN, '..', 'gateway-api');
const GROUP = 'gateway.networking.k8s.io';
const ADDRESS = Object.values(networkInterfaces())
  .flat()
  .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;

let server: KubeApiServer;
let admin: KubeClients;
let cp: ControlPlane;
let dp: DataPlane;
let crdsAbsentLog: string;
/** The CP's kubeconfig: a token bound to exactly the two Role files. */
let cpKubeconfig: string;
const upstreams: Upstream[] = [];
/** test.Echo/Unary and test.Echo/Other, raw bytes; `grpcCalls` counts what reached it. */
const ECHO = { Unary: rawMethod('Unary', false, false), Other: rawMethod('Other', false, false) } satisfies grpc.ServiceDefinition;
const EchoClient = grpc.makeGenericClientConstructor(ECHO, 'Echo');
let grpcServer: grpc.Server;
let grpcPort: number;
let grpcCalls = 0;

const logs = () => `--- cp\n${cp.recentLogs(40)}\n--- dp\n${dp.recentLogs(20)}`;

async function installGatewayCrds(): Promise<void> {
  let files: string[];
  try {
    files = (await readdir(GATEWAY_CRDS)).filter((f) => f.endsWith('.yaml'));
  } catch {
    throw new Error(`no Gateway API CRDs in ${GATEWAY_CRDS}: run \`bash scripts/test-tools.sh\``);
  }
  for (const file of files)
    for (const crd of loadAllYaml(await readFile(join(GATEWAY_CRDS, file), 'utf8')) as KubernetesObject[]) if (crd) await createObject(admin, crd);
  await pollUntil(
    async () =>
      (await admin.custom.listNamespacedCustomObject({ group: GROUP, version: 'v1', namespace: NAMESPACE, plural: 'httproutes' }).catch(() => null))
        ? true
        : undefined,
    {
      what: 'Gateway API CRDs served',
      timeoutMs: 30_000,
    },
  );
}

/** Service `name` (port 8080 "http") with one EndpointSlice per upstream index. */
async function backend(name: string, indexes: number[], portOf = (i: number) => upstreams[i].port, namespace = NAMESPACE): Promise<void> {
  await createObject(admin, {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace },
    spec: { clusterIP: 'None', ports: [{ name: 'http', port: 8080 }] },
  } as KubernetesObject);
  for (const i of indexes) {
    await createObject(admin, {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: `${name}-${i}`, namespace, labels: { 'kubernetes.io/service-name': name } },
      addressType: 'IPv4',
      ports: [{ name: 'http', port: portOf(i), protocol: 'TCP' }],
      endpoints: [{ addresses: [ADDRESS], conditions: { ready: true } }],
    } as KubernetesObject);
  }
}

const route = (name: string, spec: Record<string, unknown>, gateway = 'gw') =>
  ({
    apiVersion: `${GROUP}/v1`,
    kind: 'HTTPRoute',
    metadata: { name, namespace: NAMESPACE },
    spec: { parentRefs: [{ name: gateway }], ...spec },
  }) as KubernetesObject;

const ref = (name: string, weight?: number) => ({ name, port: 8080, ...(weight !== undefined && { weight }) });

const grpcRoute = (name: string, spec: Record<string, unknown>, gateway = 'gw') =>
  ({
    apiVersion: `${GROUP}/v1`,
    kind: 'GRPCRoute',
    metadata: { name, namespace: NAMESPACE },
    spec: { parentRefs: [{ name: gateway }], ...spec },
  }) as KubernetesObject;

async function routeStatus(
  name: string,
  plural = 'httproutes',
  namespace = NAMESPACE,
): Promise<
  Array<{
    controllerName: string;
    parentRef: { name: string; sectionName?: string };
    conditions: Array<{ type: string; status: string; reason: string; observedGeneration: number }>;
  }>
> {
  const got = (await admin.custom.getNamespacedCustomObject({ group: GROUP, version: 'v1', namespace, plural, name })) as { status?: { parents?: [] } };
  return got.status?.parents ?? [];
}

async function condition(
  name: string,
  type: string,
  plural = 'httproutes',
  namespace = NAMESPACE,
): Promise<{ status: string; reason: string; message: string }> {
  return pollUntil(
    async () =>
      (await routeStatus(name, plural, namespace))[0]?.conditions.find((c) => c.type === type) as
        | { status: string; reason: string; message: string }
        | undefined,
    {
      what: `${namespace}/${name} ${type}`,
      timeoutMs: 20_000,
      details: logs,
    },
  );
}

async function gatewayListeners(
  name: string,
): Promise<Array<{ name: string; attachedRoutes: number; supportedKinds: unknown[]; conditions: Array<{ type: string; status: string; reason: string }> }>> {
  const got = (await admin.custom.getNamespacedCustomObject({ group: GROUP, version: 'v1', namespace: NAMESPACE, plural: 'gateways', name })) as {
    status?: { listeners?: [] };
  };
  return got.status?.listeners ?? [];
}

/** One unary test.Echo call through the data plane's h2c listener, as `authority`. */
function grpcCall(method: keyof typeof ECHO, authority: string): Promise<{ error: grpc.ServiceError | null; value?: Buffer }> {
  const client = new EchoClient(`127.0.0.1:${dp.proxyPort}`, grpc.credentials.createInsecure(), { 'grpc.default_authority': authority });
  const call = (
    client as unknown as Record<string, (req: Buffer, options: grpc.CallOptions, cb: (error: grpc.ServiceError | null, value?: Buffer) => void) => void>
  )[method].bind(client);
  return new Promise((resolve) =>
    call(Buffer.from('hi'), { deadline: Date.now() + 5000 }, (error, value) => {
      client.close();
      resolve({ error, value });
    }),
  );
}

/** Polls until `path` is answered `status` (a request with `headers`). */
const answered = (path: string, status: number, headers: Record<string, string> = {}) =>
  pollUntil(
    async () => {
      const res = await dp.request('GET', path, { headers });
      return res.status === status ? res : undefined;
    },
    { what: `${path} answered ${status}`, timeoutMs: 20_000, details: logs },
  );

beforeAll(async () => {
  if (!ADDRESS) throw new Error('gateway-api needs a non-loopback IPv4 address (EndpointSlices refuse loopback)');
  server = await startKubeApiServer();
  admin = await kubeClients(await server.writeKubeconfig(server.adminToken));
  await installCrds(admin);
  const identity = await controlPlaneIdentity(server, admin, NAMESPACE);
  // The Gateway API rules of deploy/rbac/gateway-api-role.yaml, bound to the CP's ServiceAccount.
  const subjects = [{ kind: 'ServiceAccount', name: 'gatehouse-control-plane', namespace: NAMESPACE }];
  for (const doc of loadAllYaml(await readFile(join(process.cwd(), 'deploy/rbac/gateway-api-role.yaml'), 'utf8')) as KubernetesObject[]) {
    const clustered = doc.kind === 'ClusterRole';
    await createObject(admin, clustered ? doc : { ...doc, metadata: { ...doc.metadata, namespace: NAMESPACE } });
    await createObject(admin, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: clustered ? 'ClusterRoleBinding' : 'RoleBinding',
      metadata: { name: doc.metadata!.name, ...(!clustered && { namespace: NAMESPACE }) },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: doc.kind, name: doc.metadata!.name },
      subjects,
    } as KubernetesObject);
  }
  cpKubeconfig = identity.kubeconfig;
  cp = await startControlPlane({
    name: 'cp',
    env: {
      STORE: 'kubernetes',
      GATEWAY_API: 'true',
      GATEWAY_ADDRESS_SERVICE: 'gatehouse-data-plane',
      KUBECONFIG: identity.kubeconfig,
      GATEHOUSE_NAMESPACE: NAMESPACE,
      POD_NAME: 'cp',
      LEADER_ELECTION: 'false',
      ADMIN_PASSWORD: randomBytes(12).toString('hex'),
    },
  });
  dp = await startDataPlane({ controlPlaneAddr: cp.grpcAddr, id: 'dp', env: { GATEWAY_HTTPS_PORT: '0' } });
  // Started before the Gateway API CRDs exist: it must log that and keep serving our own CRDs.
  crdsAbsentLog = await pollUntil(
    async () =>
      cp
        .recentLogs(200)
        .split('\n')
        .find((l) => l.includes('are the Gateway API CRDs')),
    { what: 'the missing-CRD error', timeoutMs: 20_000, details: logs },
  );
  await installGatewayCrds();
  for (const i of [0, 1, 2]) upstreams.push(await startUpstream(`backend-${i}`, { kind: 'fixed' }, { host: ADDRESS }));
  grpcServer = new grpc.Server();
  const answer = (prefix: string) => (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
    grpcCalls++;
    callback(null, Buffer.concat([Buffer.from(prefix), call.request]));
  };
  grpcServer.addService(ECHO, { Unary: answer('echo:'), Other: answer('other:') });
  grpcPort = await new Promise<number>((resolve, reject) =>
    grpcServer.bindAsync(`${ADDRESS}:0`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  await createObject(admin, {
    apiVersion: `${GROUP}/v1`,
    kind: 'GatewayClass',
    metadata: { name: 'gatehouse' },
    spec: { controllerName: 'gatehouse.dev/gateway-controller' },
  } as KubernetesObject);
  await createObject(admin, {
    apiVersion: `${GROUP}/v1`,
    kind: 'GatewayClass',
    metadata: { name: 'other' },
    spec: { controllerName: 'example.com/other' },
  } as KubernetesObject);
  const gateway = (name: string, className: string) =>
    ({
      apiVersion: `${GROUP}/v1`,
      kind: 'Gateway',
      metadata: { name, namespace: NAMESPACE },
      spec: { gatewayClassName: className, listeners: [{ name: 'http', protocol: 'HTTP', port: 80 }] },
    }) as KubernetesObject;
  await createObject(admin, gateway('gw', 'gatehouse'));
  await createObject(admin, gateway('foreign', 'other'));
}, 180_000);

afterAll(async () => {
  await dp?.stop();
  await cp?.dispose();
  await Promise.allSettled(upstreams.map((u) => u.close()));
  grpcServer?.forceShutdown();
  await server?.stop();
});

test('a CP started before the Gateway API CRDs exist logs an error, keeps serving its own CRDs, and serves routes once they are installed', async () => {
  expect(crdsAbsentLog).toMatch(/"level":50|error/);
  const client = await createAdminClient(cp);
  await client.login();
  await backend('own', [2]);
  expect((await client.createApi(apiDefinition({ name: 'own', listenPath: '/own/*', targets: ['k8s://own:8080'] }))).status).toBe(201);
  await answered('/own/x', 200);
  // The routes of the other tests are served by this same CP, so it did pick the CRDs up.
});

test('a route whose match an API of the store already holds is refused (Accepted False, with the conflict) and the API keeps it; the data plane takes the snapshot', async () => {
  const client = await createAdminClient(cp);
  await client.login();
  await backend('taken-api', [0]);
  await backend('taken-route', [1]);
  expect((await client.createApi(apiDefinition({ name: 'taken', listenPath: '/taken/*', targets: ['k8s://taken-api:8080'] }))).status).toBe(201);
  await createObject(admin, route('taken', { rules: [{ matches: [{ path: { type: 'PathPrefix', value: '/taken' } }], backendRefs: [ref('taken-route')] }] }));
  const accepted = await pollUntil(
    async () =>
      (await routeStatus('taken'))[0]?.conditions.find((c) => c.type === 'Accepted' && c.status === 'False') as
        | { reason: string; message?: string }
        | undefined,
    {
      what: 'taken Accepted False',
      timeoutMs: 20_000,
      details: logs,
    },
  );
  expect(accepted).toMatchObject({ reason: 'UnsupportedValue', message: expect.stringContaining('already registered') });
  const before = upstreams.map((u) => u.requests.length);
  expect((await dp.request('GET', '/taken/x')).status).toBe(200);
  expect(upstreams[0].requests.length).toBe(before[0] + 1);
  // A later route proves the data plane still applies snapshots (nothing was NACKed).
  await createObject(
    admin,
    route('after-taken', { rules: [{ matches: [{ path: { type: 'PathPrefix', value: '/after-taken' } }], backendRefs: [ref('taken-route')] }] }),
  );
  await answered('/after-taken', 200);
});

test('PathPrefix + header match over two weighted backends serves traffic; Accepted and ResolvedRefs True; deleting the route stops it (404)', async () => {
  await backend('web-a', [0]);
  await backend('web-b', [1]);
  await backend('web-c', []); // weight 0: never sent anything
  const shop = route('shop', {
    rules: [
      {
        matches: [{ path: { type: 'PathPrefix', value: '/shop' }, headers: [{ name: 'X-Tenant', value: 'acme' }] }],
        backendRefs: [ref('web-a', 3), ref('web-b', 1), ref('web-c', 0)],
      },
    ],
  });
  await createObject(admin, shop);
  await answered('/shop/items', 200, { 'x-tenant': 'acme' });
  const counts = [0, 0, 0];
  for (let i = 0; i < 16; i++) {
    const before = upstreams.map((u) => u.requests.length);
    expect((await dp.request('GET', '/shop/items', { headers: { 'x-tenant': 'acme' } })).status).toBe(200);
    counts[upstreams.findIndex((u, j) => u.requests.length > before[j])]++;
  }
  // Weights 3 and 1 (balancing "weight"): 12 and 4 of 16, give or take the rotation's start.
  expect(counts[0]).toBeGreaterThanOrEqual(10);
  expect(counts[1]).toBeGreaterThanOrEqual(2);
  expect(counts[2]).toBe(0);
  expect(upstreams[0].last()?.url ?? '').toMatch(/^\/shop\/items$/);
  // The client's Host reaches the backend (Gateway API: only a URLRewrite hostname changes it).
  expect((await dp.request('GET', '/shop/items', { headers: { 'x-tenant': 'acme', host: 'shop.example' } })).status).toBe(200);
  expect(upstreams.map((u) => u.last()?.headers.host)).toContain('shop.example');
  expect((await dp.request('GET', '/shop/items')).status).toBe(404); // without the header
  expect((await dp.request('GET', '/shopping', { headers: { 'x-tenant': 'acme' } })).status).toBe(404);
  expect(await condition('shop', 'Accepted')).toMatchObject({ status: 'True', reason: 'Accepted' });
  expect(await condition('shop', 'ResolvedRefs')).toMatchObject({ status: 'True', reason: 'ResolvedRefs' });
  expect((await routeStatus('shop'))[0]).toMatchObject({ controllerName: 'gatehouse.dev/gateway-controller', parentRef: { name: 'gw' } });
  await admin.objects.delete(shop);
  await answered('/shop/items', 404, { 'x-tenant': 'acme' });
});

test('an Exact path matches only itself; a RequestHeaderModifier sets a header; URLRewrite ReplacePrefixMatch rewrites the prefix', async () => {
  await backend('exact', [2]);
  await createObject(
    admin,
    route('exact', {
      rules: [
        {
          matches: [{ path: { type: 'Exact', value: '/exact' } }],
          backendRefs: [ref('exact')],
          filters: [{ type: 'RequestHeaderModifier', requestHeaderModifier: { set: [{ name: 'X-Gw', value: 'yes' }] } }],
        },
      ],
    }),
  );
  await answered('/exact', 200);
  expect(upstreams[2].last()?.headers['x-gw']).toBe('yes');
  expect((await dp.request('GET', '/exact/more')).status).toBe(404);
  await createObject(
    admin,
    route('rewrite', {
      rules: [
        {
          matches: [{ path: { type: 'PathPrefix', value: '/old' } }],
          backendRefs: [ref('exact')],
          filters: [{ type: 'URLRewrite', urlRewrite: { path: { type: 'ReplacePrefixMatch', replacePrefixMatch: '/new' } } }],
        },
      ],
    }),
  );
  await answered('/old/a/b?q=1', 200);
  expect(upstreams[2].last()?.url).toBe('/new/a/b?q=1');
  await answered('/old', 200);
  expect(upstreams[2].last()?.url).toBe('/new');
});

test('a RequestRedirect answers the redirect without a backend', async () => {
  await createObject(
    admin,
    route('moved', {
      rules: [
        {
          matches: [{ path: { type: 'PathPrefix', value: '/moved' } }],
          filters: [{ type: 'RequestRedirect', requestRedirect: { scheme: 'https', hostname: 'new.example.com', statusCode: 301 } }],
        },
      ],
    }),
  );
  const res = await answered('/moved/x', 301);
  expect(res.headers.location).toBe('https://new.example.com/moved/x');
});

test('a RegularExpression path is Accepted False UnsupportedValue; a missing Service is ResolvedRefs False BackendNotFound and answered 500', async () => {
  await backend('regex', [2]);
  await createObject(admin, route('regex', { rules: [{ matches: [{ path: { type: 'RegularExpression', value: '/re/.*' } }], backendRefs: [ref('regex')] }] }));
  expect(await condition('regex', 'Accepted')).toMatchObject({ status: 'False', reason: 'UnsupportedValue' });
  await createObject(
    admin,
    route('ghost', { rules: [{ matches: [{ path: { type: 'PathPrefix', value: '/ghost' } }], backendRefs: [ref('no-such-service')] }] }),
  );
  expect(await condition('ghost', 'ResolvedRefs')).toMatchObject({ status: 'False', reason: 'BackendNotFound' });
  // Its only backend is invalid: the rule's requests are answered 500 (not 404 as no route, not 503).
  const res = await answered('/ghost/x', 500);
  // In plain text: the route's own answer, not a gateway error (a JSON string).
  expect(res.headers['content-type']).toBe('text/plain; charset=utf-8');
  expect(res.body.toString()).toBe('no valid backend for this route rule');
  expect((await dp.request('GET', '/re/x')).status).toBe(404);
});

test("a route whose parentRef names another class's Gateway is ignored (no traffic, no status of ours)", async () => {
  await backend('marker', [2]);
  await createObject(
    admin,
    route('foreign', { rules: [{ matches: [{ path: { type: 'PathPrefix', value: '/foreign' } }], backendRefs: [ref('marker')] }] }, 'foreign'),
  );
  // A route of ours written after it is served: by then the foreign one has been seen too.
  await createObject(admin, route('marker', { rules: [{ matches: [{ path: { type: 'PathPrefix', value: '/marker' } }], backendRefs: [ref('marker')] }] }));
  await answered('/marker', 200);
  expect((await dp.request('GET', '/foreign')).status).toBe(404);
  expect(await routeStatus('foreign')).toEqual([]);
});

test('GatewayClass Accepted with its supportedFeatures; Gateway Accepted, Programmed, its listener with supportedKinds and attachedRoutes; status is not rewritten in a loop', async () => {
  await backend('attached', [2]);
  await createObject(admin, route('attached', { rules: [{ backendRefs: [ref('attached')] }], hostnames: ['attached.test'] }));
  await answered('/anything', 200, { host: 'attached.test' });
  const gc = await pollUntil(
    async () => {
      const got = (await admin.custom.getClusterCustomObject({ group: GROUP, version: 'v1', plural: 'gatewayclasses', name: 'gatehouse' })) as {
        status?: { conditions?: Array<{ type: string; status: string }>; supportedFeatures?: Array<{ name: string }> };
      };
      return got.status?.conditions?.find((c) => c.type === 'Accepted' && c.status === 'True') ? got.status : undefined;
    },
    { what: 'GatewayClass Accepted', timeoutMs: 20_000, details: logs },
  );
  // The core features of what is served, sorted as the field asks (the conformance suite can read them from here).
  expect(gc.supportedFeatures).toEqual(
    ['GRPCRoute', 'Gateway', 'HTTPRoute', 'HTTPRoutePathRewrite', 'HTTPRouteResponseHeaderModification', 'ReferenceGrant'].map((name) => ({ name })),
  );
  const gw = await pollUntil(
    async () => {
      const got = (await admin.custom.getNamespacedCustomObject({ group: GROUP, version: 'v1', namespace: NAMESPACE, plural: 'gateways', name: 'gw' })) as {
        status?: {
          conditions?: Array<{ type: string; status: string }>;
          listeners?: Array<{ name: string; attachedRoutes: number; supportedKinds: unknown[] }>;
        };
      };
      return got.status?.listeners?.length ? got.status : undefined;
    },
    { what: 'Gateway status', timeoutMs: 20_000, details: logs },
  );
  expect(
    gw.conditions
      ?.filter((c) => c.status === 'True')
      .map((c) => c.type)
      .sort(),
  ).toEqual(['Accepted', 'Programmed']);
  expect(gw.listeners?.[0]).toMatchObject({
    name: 'http',
    supportedKinds: [
      { group: GROUP, kind: 'HTTPRoute' },
      { group: GROUP, kind: 'GRPCRoute' },
    ],
  });
  expect(gw.listeners?.[0].attachedRoutes).toBeGreaterThan(0);
  // Each status write is an update event the controller sees: an unchanged status must not be written again.
  const version = async () =>
    (
      (await admin.custom.getNamespacedCustomObject({
        group: GROUP,
        version: 'v1',
        namespace: NAMESPACE,
        plural: 'httproutes',
        name: 'attached',
      })) as KubernetesObject
    ).metadata!.resourceVersion;
  await condition('attached', 'Accepted');
  const before = await version();
  await new Promise((resolve) => setTimeout(resolve, 1500));
  expect(await version()).toBe(before);
});

test('only the leader writes status: a replica waiting for the Lease writes none, and writes once it holds it', async () => {
  const lease = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'gw-second', namespace: NAMESPACE } };
  await createObject(admin, {
    ...lease,
    spec: { holderIdentity: 'someone-else', leaseDurationSeconds: 3600, renewTime: new Date().toISOString().replace('Z', '000Z') },
  } as KubernetesObject);
  await createObject(admin, {
    apiVersion: `${GROUP}/v1`,
    kind: 'GatewayClass',
    metadata: { name: 'second' },
    spec: { controllerName: 'gatehouse.dev/second' },
  } as KubernetesObject);
  await createObject(admin, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Gateway',
    metadata: { name: 'second', namespace: NAMESPACE },
    spec: { gatewayClassName: 'second', listeners: [{ name: 'http', protocol: 'HTTP', port: 80 }] },
  } as KubernetesObject);
  await backend('second', [0]);
  await createObject(
    admin,
    route('second', { rules: [{ matches: [{ path: { type: 'PathPrefix', value: '/second' } }], backendRefs: [ref('second')] }] }, 'second'),
  );
  const follower = await startControlPlane({
    name: 'follower',
    env: {
      STORE: 'kubernetes',
      GATEWAY_API: 'true',
      GATEWAY_CONTROLLER_NAME: 'gatehouse.dev/second',
      KUBECONFIG: cpKubeconfig,
      GATEHOUSE_NAMESPACE: NAMESPACE,
      POD_NAME: 'follower',
      LEASE_NAME: 'gw-second',
      LEASE_DURATION: '2s',
      ADMIN_PASSWORD: randomBytes(12).toString('hex'),
    },
  });
  try {
    // Started and listing (its admin API answers), then a few reconciles' time without the Lease.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(await routeStatus('second')).toEqual([]);
    // The other holder lets go: the follower takes the Lease and writes.
    const held = (await admin.objects.read(lease as never)) as KubernetesObject & { spec: Record<string, unknown> };
    await admin.objects.replace({ ...held, spec: { ...held.spec, holderIdentity: null, leaseDurationSeconds: 1 } } as never);
    const accepted = await pollUntil(
      async () => (await routeStatus('second')).find((p) => p.controllerName === 'gatehouse.dev/second')?.conditions.find((c) => c.type === 'Accepted'),
      {
        what: 'status written by the new leader',
        timeoutMs: 30_000,
        details: () => follower.recentLogs(30),
      },
    );
    expect(accepted).toMatchObject({ status: 'True' });
  } finally {
    await follower.dispose();
  }
});

test('a GRPCRoute serves a grpc-js client over h2c through a Service to a grpc-js server; a method it does not match is UNIMPLEMENTED from the gateway; Accepted and ResolvedRefs True', async () => {
  await backend('grpc-echo', [0], () => grpcPort);
  await createObject(
    admin,
    grpcRoute('echo', {
      hostnames: ['grpc.test'],
      rules: [{ matches: [{ method: { service: 'test.Echo', method: 'Unary' } }], backendRefs: [ref('grpc-echo')] }],
    }),
  );
  const served = await pollUntil(
    async () => {
      const got = await grpcCall('Unary', 'grpc.test');
      return got.error ? undefined : got;
    },
    { what: 'test.Echo/Unary through the GRPCRoute', timeoutMs: 20_000, details: logs },
  );
  expect(served.value?.toString()).toBe('echo:hi');
  const before = grpcCalls;
  const other = await grpcCall('Other', 'grpc.test');
  expect(other.error?.code).toBe(grpc.status.UNIMPLEMENTED);
  expect(other.error?.details).toBe('no API found with those values');
  // Another host than the route's hostnames: no route either.
  expect((await grpcCall('Unary', 'elsewhere.test')).error?.code).toBe(grpc.status.UNIMPLEMENTED);
  expect(grpcCalls).toBe(before);
  expect(await condition('echo', 'Accepted', 'grpcroutes')).toMatchObject({ status: 'True', reason: 'Accepted' });
  expect(await condition('echo', 'ResolvedRefs', 'grpcroutes')).toMatchObject({ status: 'True', reason: 'ResolvedRefs' });
  expect((await routeStatus('echo', 'grpcroutes'))[0]).toMatchObject({ controllerName: 'gatehouse.dev/gateway-controller', parentRef: { name: 'gw' } });
});

test('allowedRoutes.kinds GRPCRoute: an HTTPRoute on that listener is Accepted False NotAllowedByListeners and not served or counted; a GRPCRoute is; a kind we do not serve is InvalidRouteKinds', async () => {
  await createObject(admin, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Gateway',
    metadata: { name: 'grpc-only', namespace: NAMESPACE },
    spec: {
      gatewayClassName: 'gatehouse',
      listeners: [
        { name: 'grpc', protocol: 'HTTP', port: 80, allowedRoutes: { kinds: [{ kind: 'GRPCRoute' }] } },
        { name: 'tcp-kind', protocol: 'HTTP', port: 81, allowedRoutes: { kinds: [{ kind: 'TCPRoute' }] } },
      ],
    },
  } as KubernetesObject);
  await backend('kinds', [1]);
  await backend('kinds-grpc', [0], () => grpcPort);
  await createObject(
    admin,
    route('kind-refused', { rules: [{ matches: [{ path: { type: 'PathPrefix', value: '/kind-refused' } }], backendRefs: [ref('kinds')] }] }, 'grpc-only'),
  );
  await createObject(
    admin,
    grpcRoute(
      'kind-allowed',
      { hostnames: ['only.test'], rules: [{ matches: [{ method: { service: 'test.Echo' } }], backendRefs: [ref('kinds-grpc')] }] },
      'grpc-only',
    ),
  );
  const refused = await condition('kind-refused', 'Accepted');
  expect(refused).toMatchObject({ status: 'False', reason: 'NotAllowedByListeners' });
  expect(refused.message).toContain('allows a HTTPRoute');
  expect(await condition('kind-allowed', 'Accepted', 'grpcroutes')).toMatchObject({ status: 'True' });
  const other = await pollUntil(
    async () => {
      const got = await grpcCall('Other', 'only.test');
      return got.error ? undefined : got;
    },
    { what: 'test.Echo/* through kind-allowed', timeoutMs: 20_000, details: logs },
  );
  expect(other.value?.toString()).toBe('other:hi');
  expect((await dp.request('GET', '/kind-refused')).status).toBe(404);
  const listeners = await pollUntil(
    async () => {
      const got = await gatewayListeners('grpc-only');
      return got[0]?.attachedRoutes === 1 ? got : undefined;
    },
    { what: 'grpc-only listener status', timeoutMs: 20_000, details: logs },
  );
  expect(listeners[0].supportedKinds).toEqual([{ group: GROUP, kind: 'GRPCRoute' }]);
  expect(listeners[1]).toMatchObject({ name: 'tcp-kind', supportedKinds: [], attachedRoutes: 0 });
  expect(listeners[1].conditions.find((c) => c.type === 'ResolvedRefs')).toMatchObject({ status: 'False', reason: 'InvalidRouteKinds' });
});

const namespace = (name: string, labels: Record<string, string> = {}) =>
  createObject(admin, { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } } as KubernetesObject);

test('Gateways and routes in other namespaces: allowedRoutes Same (the default), All and Selector admit by the route namespace; attachedRoutes counts per listener', async () => {
  await namespace('infra');
  await namespace('team-red', { team: 'red' });
  await namespace('team-blue', { team: 'blue' });
  await createObject(admin, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Gateway',
    metadata: { name: 'shared', namespace: 'infra' },
    spec: {
      gatewayClassName: 'gatehouse',
      listeners: [
        { name: 'same', protocol: 'HTTP', port: 80, hostname: 'same.test' },
        { name: 'all', protocol: 'HTTP', port: 80, hostname: 'all.test', allowedRoutes: { namespaces: { from: 'All' } } },
        {
          name: 'red',
          protocol: 'HTTP',
          port: 80,
          hostname: 'red.test',
          allowedRoutes: { namespaces: { from: 'Selector', selector: { matchLabels: { team: 'red' } } } },
        },
      ],
    },
  } as KubernetesObject);
  for (const [ns, i] of [
    ['infra', 0],
    ['team-red', 1],
    ['team-blue', 2],
  ] as const) {
    await backend('echo', [i], undefined, ns);
    await createObject(admin, {
      apiVersion: `${GROUP}/v1`,
      kind: 'HTTPRoute',
      metadata: { name: 'multi', namespace: ns },
      spec: {
        parentRefs: ['same', 'all', 'red'].map((sectionName) => ({ name: 'shared', namespace: 'infra', sectionName })),
        rules: [{ backendRefs: [ref('echo')] }],
      },
    } as KubernetesObject);
  }
  // Which namespace's route each listener hostname reaches (its upstream), and which it refuses.
  const reached = async (host: string) => {
    const before = upstreams.map((u) => u.requests.length);
    const res = await dp.request('GET', '/multi', { headers: { host } });
    return res.status === 200 ? upstreams.findIndex((u, j) => u.requests.length > before[j]) : res.status;
  };
  await pollUntil(async () => ((await reached('red.test')) === 1 ? true : undefined), {
    what: 'red.test served by team-red',
    timeoutMs: 20_000,
    details: logs,
  });
  expect(await reached('same.test')).toBe(0);
  expect(await reached('red.test')).toBe(1);
  const verdicts = async (ns: string) =>
    pollUntil(
      async () => {
        const parents = await routeStatus('multi', 'httproutes', ns);
        return parents.length === 3
          ? Object.fromEntries(parents.map((p) => [p.parentRef.sectionName, p.conditions.find((c) => c.type === 'Accepted')!.reason]))
          : undefined;
      },
      { what: `${ns}/multi status`, timeoutMs: 20_000, details: logs },
    );
  expect(await verdicts('infra')).toEqual({ same: 'Accepted', all: 'Accepted', red: 'NotAllowedByListeners' });
  expect(await verdicts('team-red')).toEqual({ same: 'NotAllowedByListeners', all: 'Accepted', red: 'Accepted' });
  expect(await verdicts('team-blue')).toEqual({ same: 'NotAllowedByListeners', all: 'Accepted', red: 'NotAllowedByListeners' });
  // all.test takes the routes of all three namespaces; the oldest holds the identical match.
  expect([0, 1, 2]).toContain(await reached('all.test'));
  // The Gateway's status is written beside the routes' and may lag them by a reconcile (a 409 on a cached
  // resourceVersion is retried by the next event), so its counts are awaited, not read once.
  const attachedCounts = (expected: Record<string, number>) =>
    pollUntil(
      async () => {
        const got = (await admin.custom.getNamespacedCustomObject({ group: GROUP, version: 'v1', namespace: 'infra', plural: 'gateways', name: 'shared' })) as {
          status?: { listeners?: Array<{ name: string; attachedRoutes: number }> };
        };
        const counts = Object.fromEntries((got.status?.listeners ?? []).map((l) => [l.name, l.attachedRoutes]));
        if (JSON.stringify(counts) !== JSON.stringify(expected)) throw new Error(`attachedRoutes ${JSON.stringify(counts)}`);
        return counts;
      },
      { what: `infra/shared attachedRoutes ${JSON.stringify(expected)}`, timeoutMs: 20_000, details: logs },
    );
  await attachedCounts({ same: 1, all: 3, red: 1 });
  // Relabelling a namespace moves its route: team-blue joins the red listener (team-red's route, which would
  // hold the identical match there, removed first).
  await admin.objects.delete({ apiVersion: `${GROUP}/v1`, kind: 'HTTPRoute', metadata: { name: 'multi', namespace: 'team-red' } });
  await admin.objects.patch(
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'team-blue', labels: { team: 'red' } } },
    undefined,
    undefined,
    undefined,
    undefined,
    PatchStrategy.MergePatch,
  );
  await pollUntil(async () => ((await verdicts('team-blue')).red === 'Accepted' ? true : undefined), {
    what: 'team-blue admitted by the selector',
    timeoutMs: 20_000,
    details: logs,
  });
  await pollUntil(async () => ((await reached('red.test')) === 2 ? true : undefined), {
    what: 'red.test served by team-blue',
    timeoutMs: 20_000,
    details: logs,
  });
});

test('a backendRef to another namespace: RefNotPermitted and 500 without a ReferenceGrant there; served once a grant allows it, refused again when it goes', async () => {
  await namespace('shop');
  await namespace('payments');
  await backend('pay', [1], undefined, 'payments');
  await createObject(admin, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Gateway',
    metadata: { name: 'shop-gw', namespace: 'shop' },
    spec: { gatewayClassName: 'gatehouse', listeners: [{ name: 'http', protocol: 'HTTP', port: 80, hostname: 'shop.test' }] },
  } as KubernetesObject);
  await createObject(admin, {
    apiVersion: `${GROUP}/v1`,
    kind: 'HTTPRoute',
    metadata: { name: 'checkout', namespace: 'shop' },
    spec: {
      parentRefs: [{ name: 'shop-gw' }],
      rules: [{ matches: [{ path: { type: 'PathPrefix', value: '/checkout' } }], backendRefs: [{ name: 'pay', namespace: 'payments', port: 8080 }] }],
    },
  } as KubernetesObject);
  expect(await condition('checkout', 'ResolvedRefs', 'httproutes', 'shop')).toMatchObject({ status: 'False', reason: 'RefNotPermitted' });
  const before = upstreams[1].requests.length;
  await pollUntil(async () => ((await dp.request('GET', '/checkout', { headers: { host: 'shop.test' } })).status === 500 ? true : undefined), {
    what: '/checkout 500',
    timeoutMs: 20_000,
    details: logs,
  });
  expect(upstreams[1].requests.length).toBe(before);
  // A grant for another Service, or from another namespace, does not allow it.
  const grant = (name: string, fromNamespace: string, to: Record<string, string>) =>
    ({
      apiVersion: `${GROUP}/v1beta1`,
      kind: 'ReferenceGrant',
      metadata: { name, namespace: 'payments' },
      spec: { from: [{ group: GROUP, kind: 'HTTPRoute', namespace: fromNamespace }], to: [{ group: '', kind: 'Service', ...to }] },
    }) as KubernetesObject;
  await createObject(admin, grant('other-service', 'shop', { name: 'not-pay' }));
  await createObject(admin, grant('other-namespace', 'infra', {}));
  await new Promise((resolve) => setTimeout(resolve, 1000));
  expect(await condition('checkout', 'ResolvedRefs', 'httproutes', 'shop')).toMatchObject({ status: 'False', reason: 'RefNotPermitted' });
  const allow = grant('allow-shop', 'shop', { name: 'pay' });
  await createObject(admin, allow);
  await pollUntil(async () => ((await dp.request('GET', '/checkout', { headers: { host: 'shop.test' } })).status === 200 ? true : undefined), {
    what: '/checkout 200',
    timeoutMs: 20_000,
    details: logs,
  });
  expect(upstreams[1].requests.length).toBeGreaterThan(before);
  await pollUntil(async () => ((await condition('checkout', 'ResolvedRefs', 'httproutes', 'shop')).status === 'True' ? true : undefined), {
    what: 'checkout ResolvedRefs True',
    timeoutMs: 20_000,
    details: logs,
  });
  await admin.objects.delete(allow);
  await pollUntil(async () => ((await dp.request('GET', '/checkout', { headers: { host: 'shop.test' } })).status === 500 ? true : undefined), {
    what: '/checkout 500 again',
    timeoutMs: 20_000,
    details: logs,
  });
});

test("Gateway status.addresses: the data planes' Service's cluster IP (GATEWAY_ADDRESS_SERVICE)", async () => {
  await createObject(admin, {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'gatehouse-data-plane', namespace: NAMESPACE },
    spec: { ports: [{ name: 'http', port: 80 }] },
  } as KubernetesObject);
  const svc = (await admin.objects.read({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'gatehouse-data-plane', namespace: NAMESPACE } })) as V1Service;
  expect(svc.spec?.clusterIP).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
  const addresses = await pollUntil(
    async () => {
      const got = (await admin.custom.getNamespacedCustomObject({ group: GROUP, version: 'v1', namespace: NAMESPACE, plural: 'gateways', name: 'gw' })) as {
        status?: { addresses?: unknown[] };
      };
      return got.status?.addresses?.length ? got.status.addresses : undefined;
    },
    { what: 'gw status.addresses', timeoutMs: 20_000, details: logs },
  );
  expect(addresses).toEqual([{ type: 'IPAddress', value: svc.spec!.clusterIP }]);
});

test('a parentRef whose sectionName or port names no listener of the Gateway is Accepted False NoMatchingParent', async () => {
  await backend('unmatched', [2]);
  const parent = (extra: Record<string, unknown>) =>
    ({
      apiVersion: `${GROUP}/v1`,
      kind: 'HTTPRoute',
      metadata: { name: `unmatched-${Object.keys(extra)[0].toLowerCase()}`, namespace: NAMESPACE },
      spec: { parentRefs: [{ name: 'gw', ...extra }], rules: [{ backendRefs: [ref('unmatched')] }] },
    }) as KubernetesObject;
  await createObject(admin, parent({ sectionName: 'no-such-listener' }));
  await createObject(admin, parent({ port: 8080 }));
  expect(await condition('unmatched-sectionname', 'Accepted')).toMatchObject({
    status: 'False',
    reason: 'NoMatchingParent',
    message: 'Gateway gw has no listener named no-such-listener',
  });
  expect(await condition('unmatched-port', 'Accepted')).toMatchObject({
    status: 'False',
    reason: 'NoMatchingParent',
    message: 'Gateway gw has no listener on port 8080',
  });
});

test("every condition's observedGeneration follows a spec change of the route and of the Gateway", async () => {
  await backend('gen', [2]);
  await createObject(admin, route('gen', { rules: [{ matches: [{ path: { type: 'PathPrefix', value: '/gen-a' } }], backendRefs: [ref('gen')] }] }));
  await answered('/gen-a', 200);
  await admin.objects.patch(
    {
      apiVersion: `${GROUP}/v1`,
      kind: 'HTTPRoute',
      metadata: { name: 'gen', namespace: NAMESPACE },
      spec: { rules: [{ matches: [{ path: { type: 'PathPrefix', value: '/gen-b' } }], backendRefs: [ref('gen')] }] },
    },
    undefined,
    undefined,
    undefined,
    undefined,
    PatchStrategy.MergePatch,
  );
  await answered('/gen-b', 200);
  const generations = await pollUntil(
    async () => {
      const conditions = (await routeStatus('gen'))[0]?.conditions ?? [];
      return conditions.length === 2 && conditions.every((c) => c.observedGeneration === 2) ? conditions : undefined;
    },
    { what: 'gen conditions at generation 2', timeoutMs: 20_000, details: logs },
  );
  expect(generations.map((c) => c.type).sort()).toEqual(['Accepted', 'ResolvedRefs']);
  await createObject(admin, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Gateway',
    metadata: { name: 'gen-gw', namespace: NAMESPACE },
    spec: { gatewayClassName: 'gatehouse', listeners: [{ name: 'a', protocol: 'HTTP', port: 80 }] },
  } as KubernetesObject);
  await admin.objects.patch(
    {
      apiVersion: `${GROUP}/v1`,
      kind: 'Gateway',
      metadata: { name: 'gen-gw', namespace: NAMESPACE },
      spec: { listeners: [{ name: 'b', protocol: 'HTTP', port: 80 }] },
    },
    undefined,
    undefined,
    undefined,
    undefined,
    PatchStrategy.MergePatch,
  );
  const gw = await pollUntil(
    async () => {
      const got = (await admin.custom.getNamespacedCustomObject({ group: GROUP, version: 'v1', namespace: NAMESPACE, plural: 'gateways', name: 'gen-gw' })) as {
        status?: { conditions?: Array<{ observedGeneration: number }>; listeners?: Array<{ name: string; conditions: Array<{ observedGeneration: number }> }> };
      };
      const all = [...(got.status?.conditions ?? []), ...(got.status?.listeners ?? []).flatMap((l) => l.conditions)];
      return got.status?.listeners?.[0]?.name === 'b' && all.every((c) => c.observedGeneration === 2) ? got.status : undefined;
    },
    { what: 'gen-gw conditions at generation 2', timeoutMs: 20_000, details: logs },
  );
  expect(gw.listeners).toHaveLength(1);
});

test("an HTTPS listener's certificateRefs: a kubernetes.io/tls Secret with a matching pair resolves; missing, of another kind, malformed or mismatched is InvalidCertificateRef; another namespace's is RefNotPermitted until a ReferenceGrant allows it", async () => {
  const certs = await createTestCertificates();
  try {
    const b64 = async (file: string) => (await readFile(file)).toString('base64');
    const tlsSecret = async (name: string, namespace: string, crt: string, key: string) =>
      createObject(admin, {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name, namespace },
        type: 'kubernetes.io/tls',
        data: { 'tls.crt': crt, 'tls.key': key },
      } as KubernetesObject);
    await namespace('certs');
    await tlsSecret('good', NAMESPACE, await b64(certs.serverCert), await b64(certs.serverKey));
    await tlsSecret('mismatched', NAMESPACE, await b64(certs.serverCert), await b64(certs.clientKey));
    await tlsSecret('malformed', NAMESPACE, Buffer.from('Hello world').toString('base64'), Buffer.from('Hello world').toString('base64'));
    await tlsSecret('elsewhere', 'certs', await b64(certs.serverCert), await b64(certs.serverKey));
    const https = (name: string, certificateRef: Record<string, string>) => ({
      name,
      protocol: 'HTTPS',
      port: 443,
      hostname: `${name}.test`,
      tls: { certificateRefs: [certificateRef] },
    });
    await createObject(admin, {
      apiVersion: `${GROUP}/v1`,
      kind: 'Gateway',
      metadata: { name: 'tls', namespace: NAMESPACE },
      spec: {
        gatewayClassName: 'gatehouse',
        listeners: [
          https('good', { name: 'good' }),
          https('missing', { name: 'absent' }),
          https('kind', { kind: 'ConfigMap', name: 'good' }),
          https('malformed', { name: 'malformed' }),
          https('mismatched', { name: 'mismatched' }),
          https('granted', { name: 'elsewhere', namespace: 'certs' }),
        ],
      },
    } as KubernetesObject);
    const resolved = (listeners: Awaited<ReturnType<typeof gatewayListeners>>, name: string) =>
      listeners.find((l) => l.name === name)?.conditions.find((c) => c.type === 'ResolvedRefs');
    const programmed = (listeners: Awaited<ReturnType<typeof gatewayListeners>>, name: string) =>
      listeners.find((l) => l.name === name)?.conditions.find((c) => c.type === 'Programmed');
    const listeners = await pollUntil(async () => ((await gatewayListeners('tls')).length === 6 ? gatewayListeners('tls') : undefined), {
      what: 'tls listener status',
      timeoutMs: 20_000,
      details: logs,
    });
    expect(resolved(listeners, 'good')).toMatchObject({ status: 'True' });
    expect(programmed(listeners, 'good')).toMatchObject({ status: 'True', reason: 'Programmed' });
    for (const name of ['missing', 'kind', 'malformed', 'mismatched']) {
      expect({ name, ...resolved(listeners, name) }).toMatchObject({ name, status: 'False', reason: 'InvalidCertificateRef' });
      expect({ name, ...programmed(listeners, name) }).toMatchObject({ name, status: 'False', reason: 'Invalid' });
    }
    expect(resolved(listeners, 'granted')).toMatchObject({ status: 'False', reason: 'RefNotPermitted' });
    await createObject(admin, {
      apiVersion: `${GROUP}/v1beta1`,
      kind: 'ReferenceGrant',
      metadata: { name: 'tls-secrets', namespace: 'certs' },
      spec: { from: [{ group: GROUP, kind: 'Gateway', namespace: NAMESPACE }], to: [{ group: '', kind: 'Secret', name: 'elsewhere' }] },
    } as KubernetesObject);
    await pollUntil(async () => (resolved(await gatewayListeners('tls'), 'granted')?.status === 'True' ? true : undefined), {
      what: 'the granted certificateRef resolved',
      timeoutMs: 20_000,
      details: logs,
    });
  } finally {
    await certs.dispose();
  }
});

/**
 * GET `path` on the data plane's GATEWAY_HTTPS_PORT with SNI and Host `servername`, verifying the certificate
 * against `ca` (and the name): the answer and the served certificate's SAN; rejects when the handshake fails.
 */
function gatewayHttps(servername: string, path: string, ca: string): Promise<{ status: number; body: string; subjectAltName: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      { host: '127.0.0.1', port: dp.process.ports['gateway-https'], path, servername, headers: { host: servername }, ca, agent: false, timeout: 5000 },
      (res) => {
        const subjectAltName = (res.socket as TLSSocket).getPeerCertificate().subjectaltname ?? '';
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString(), subjectAltName }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

test('HTTPS listeners are served on GATEWAY_HTTPS_PORT: the certificate by SNI (exact and wildcard hostnames), routed as HTTPRoutes say; a rotated Secret is served; a Secret made invalid is Invalid and left out while the rest keeps serving; no private key in the logs or the admin API', async () => {
  const sets: NamedCertificates[] = [];
  const named = async (name: string) => {
    const set = await createNamedCertificates([name]);
    sets.push(set);
    return {
      ca: await readFile(set.caCert, 'utf8'),
      crt: (await readFile(set.serverCert)).toString('base64'),
      key: (await readFile(set.serverKey)).toString('base64'),
    };
  };
  const secretObject = (name: string, pair: { crt: string; key: string }) =>
    ({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name, namespace: NAMESPACE },
      type: 'kubernetes.io/tls',
      data: { 'tls.crt': pair.crt, 'tls.key': pair.key },
    }) as KubernetesObject;
  try {
    const shop = await named('shop.example.test');
    const pets = await named('*.pets.example.test');
    await createObject(admin, secretObject('shop-cert', shop));
    await createObject(admin, secretObject('pets-cert', pets));
    await backend('secure-shop', [0]);
    await backend('secure-pets', [1]);
    const https = (name: string, hostname: string, secret: string) => ({
      name,
      protocol: 'HTTPS',
      port: 443,
      hostname,
      tls: { certificateRefs: [{ name: secret }] },
    });
    await createObject(admin, {
      apiVersion: `${GROUP}/v1`,
      kind: 'Gateway',
      metadata: { name: 'secure', namespace: NAMESPACE },
      spec: { gatewayClassName: 'gatehouse', listeners: [https('shop', 'shop.example.test', 'shop-cert'), https('pets', '*.pets.example.test', 'pets-cert')] },
    } as KubernetesObject);
    await createObject(admin, route('secure-shop', { hostnames: ['shop.example.test'], rules: [{ backendRefs: [ref('secure-shop')] }] }, 'secure'));
    await createObject(admin, route('secure-pets', { hostnames: ['dog.pets.example.test'], rules: [{ backendRefs: [ref('secure-pets')] }] }, 'secure'));

    // Each name is served its listener's certificate (verified against that certificate's own CA) and reaches its route's backend.
    // Polled until routed: the certificate may be served before the route is (the Gateway is seen first).
    const routed = async (servername: string, path: string, ca: string) => {
      const answer = await gatewayHttps(servername, path, ca).catch(() => undefined);
      return answer?.status === 200 ? answer : undefined;
    };
    const shopAnswer = await pollUntil(() => routed('shop.example.test', '/cart', shop.ca), {
      what: 'shop.example.test served over HTTPS',
      timeoutMs: 30_000,
      details: logs,
    });
    expect(shopAnswer).toMatchObject({ status: 200, subjectAltName: 'DNS:shop.example.test' });
    expect(JSON.parse(shopAnswer.body)).toMatchObject({ upstream: 'backend-0', url: '/cart' });
    const petsAnswer = await pollUntil(() => routed('dog.pets.example.test', '/bark', pets.ca), {
      what: 'dog.pets.example.test served over HTTPS',
      timeoutMs: 30_000,
      details: logs,
    });
    expect(petsAnswer).toMatchObject({ status: 200, subjectAltName: 'DNS:*.pets.example.test' });
    expect(JSON.parse(petsAnswer.body)).toMatchObject({ upstream: 'backend-1', url: '/bark' });
    // A name no listener takes: no certificate, the handshake fails.
    await expect(gatewayHttps('unknown.example.test', '/', shop.ca)).rejects.toThrow();
    // The shop's certificate does not verify for the pets' name: each name gets its own.
    await expect(gatewayHttps('dog.pets.example.test', '/bark', shop.ca)).rejects.toThrow();

    // Rotation: the Secret's new certificate is served (Secrets are read again at every resync, 10 s).
    const rotated = await named('shop.example.test');
    await admin.objects.replace(secretObject('shop-cert', rotated));
    const afterRotation = await pollUntil(() => routed('shop.example.test', '/cart', rotated.ca), {
      what: 'the rotated certificate served',
      timeoutMs: 30_000,
      details: logs,
    });
    expect(afterRotation.status).toBe(200);
    await expect(gatewayHttps('shop.example.test', '/cart', shop.ca)).rejects.toThrow();

    // A Secret made invalid: its listener is Invalid (status as before) and no longer served; the other one keeps serving.
    await admin.objects.replace(secretObject('pets-cert', { crt: Buffer.from('not a certificate').toString('base64'), key: pets.key }));
    await pollUntil(
      async () =>
        (await gatewayListeners('secure'))
          .find((l) => l.name === 'pets')
          ?.conditions.find((c) => c.type === 'ResolvedRefs' && c.reason === 'InvalidCertificateRef')
          ? true
          : undefined,
      { what: 'pets listener InvalidCertificateRef', timeoutMs: 30_000, details: logs },
    );
    await pollUntil(async () => ((await gatewayHttps('dog.pets.example.test', '/bark', pets.ca).catch(() => null)) === null ? true : undefined), {
      what: 'the invalid listener no longer served',
      timeoutMs: 30_000,
      details: logs,
    });
    expect(await gatewayHttps('shop.example.test', '/cart', rotated.ca)).toMatchObject({ status: 200 });
    // Nothing was NACKed: the control plane left the invalid listener out before it reached a data plane.
    expect(dp.recentLogs(100_000)).not.toContain('snapshot rejected');
    // No private key in either process's log, as PEM or as the Secret's base64.
    const logged = `${cp.recentLogs(100_000)}\n${dp.recentLogs(100_000)}`;
    for (const pair of [shop, pets, rotated]) {
      expect(logged).not.toContain(pair.key.slice(0, 60));
      expect(logged).not.toContain(Buffer.from(pair.key, 'base64').toString().split('\n')[1]);
    }
    expect(logged).not.toContain('PRIVATE KEY');
    // Nor does the admin API: what it shows of the served configuration and of the data planes.
    const client = await createAdminClient(cp);
    await client.login();
    for (const shown of [
      await client.dataplanes(),
      await client.request('GET', '/config'),
      await client.request('POST', '/explain', { body: { method: 'GET', path: '/cart', host: 'shop.example.test' } }),
    ]) {
      expect(shown.status).toBe(200);
      expect(JSON.stringify(shown.body)).not.toContain('PRIVATE KEY');
    }
  } finally {
    for (const set of sets) await set.dispose();
  }
});
