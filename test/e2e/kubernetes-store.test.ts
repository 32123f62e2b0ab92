/**
 * STORE=kubernetes on a real kube-apiserver + etcd (scripts/test-tools.sh builds them): two CP
 * replicas running with a ServiceAccount token bound to exactly deploy/rbac/role.yaml, one DP on
 * each, real upstreams. The admin REST API and direct CR writes (what `kubectl apply` does) edit
 * the same objects; every DP serves the same content hash.
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { jest } from '@jest/globals';
import { Watch, type KubernetesObject } from '@kubernetes/client-node';
import { SignJWT } from 'jose';
import { createAdminClient, type AdminClient } from '../helpers/admin-client.js';
import { apiDefinition } from '../helpers/api-definition.js';
import { controlPlaneIdentity, installCrds, kubeClients, type KubeClients } from '../helpers/gatehouse-on-kubernetes.js';
import { startKubeApiServer, statusWritesServed, type KubeApiServer } from '../helpers/kube-apiserver.js';
import { delay, pollUntil } from '../helpers/poll-until.js';
import { CONTROL_PLANE_SCRIPT, startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';
import { startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { spawnService, type ServiceProcess } from '../helpers/service-process.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';
import { REPORT_ANNOTATION, REPORT_LABEL } from '../../control-plane/src/controller/dataplane-reports.js';

jest.setTimeout(120_000);

const NAMESPACE = 'gatehouse';
const GROUP = { group: 'gatehouse.dev', version: 'v1alpha1', namespace: NAMESPACE };
const APIS = { ...GROUP, plural: 'apidefinitions' };
const LEASE_NAME = 'gatehouse-control-plane';
const LEASE_DURATION_MS = 2000;

let server: KubeApiServer;
let admin: KubeClients;
let identity: KubeClients;
let upstream: Upstream;
const cps: ControlPlane[] = [];
const dps: DataPlane[] = [];
const clients: AdminClient[] = [];
const password = randomBytes(12).toString('hex');
const jwtSecret = randomBytes(32).toString('hex');
/** One installation key for both replicas, as the chart's Secret gives them: the same key hashes alike on either. */
const keyAuthHashKey = randomBytes(32).toString('hex');

const replicaEnv = (name: string) => ({
  STORE: 'kubernetes',
  KUBECONFIG: identity.kubeconfig,
  GATEHOUSE_NAMESPACE: NAMESPACE,
  POD_NAME: name,
  LEASE_DURATION: `${LEASE_DURATION_MS / 1000}s`,
  ADMIN_PASSWORD: password,
  ADMIN_JWT_SECRET: jwtSecret,
  KEY_AUTH_HASH_KEY: keyAuthHashKey,
});

function startReplica(name: string, env: Record<string, string> = {}): Promise<ControlPlane> {
  return startControlPlane({ name, env: { ...replicaEnv(name), ...env } });
}

const logs = () =>
  [...cps, ...dps].map((p) => `--- ${p instanceof Object && 'adminUrl' in p ? (p as ControlPlane).name : (p as DataPlane).id}\n${p.recentLogs(30)}`).join('\n');

/** Polls until the DP answers `path` with the upstream's 200 (or, with `gone`, with the gateway's 404). */
async function served(dp: DataPlane, path: string, gone = false): Promise<void> {
  await pollUntil(
    async () => {
      const res = await dp.request('GET', path);
      return (gone ? res.status === 404 : res.status === 200) ? true : undefined;
    },
    { what: `${dp.id} ${gone ? 'no longer serving' : 'serving'} ${path}`, timeoutMs: 20_000, details: logs },
  );
}

async function readCr(name: string): Promise<any> {
  return admin.custom.getNamespacedCustomObject({ ...APIS, name });
}

/**
 * kubectl edit: read the CR, change its spec, replace it; read again when it changed meanwhile. The CPs write the CRs'
 * status, which moves their resourceVersion, so a replace can meet a 409 Conflict that no one's spec change caused.
 */
async function editSpec(resource: { plural: string }, name: string, edit: (spec: any) => Record<string, unknown>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const cr = (await admin.custom.getNamespacedCustomObject({ ...GROUP, plural: resource.plural, name })) as any;
    try {
      await admin.custom.replaceNamespacedCustomObject({ ...GROUP, plural: resource.plural, name, body: { ...cr, spec: edit(cr.spec) } });
      return;
    } catch (err) {
      if ((err as { code?: number }).code !== 409 || attempt === 5) throw err;
    }
  }
}

function crFor(metadataName: string, spec: Record<string, unknown>): KubernetesObject & { spec: unknown } {
  return { apiVersion: 'gatehouse.dev/v1alpha1', kind: 'ApiDefinition', metadata: { name: metadataName, namespace: NAMESPACE }, spec };
}

/** The Secret the store keeps a CR's secrets in, checked to be owned by that CR (garbage-collected with it). */
async function readOwnedSecret(cr: any): Promise<any> {
  const name = `gatehouse-${String(cr.kind).toLowerCase()}-${cr.metadata.name}`;
  const secret = (await admin.objects.read({ apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: NAMESPACE } })) as any;
  expect(secret.metadata.ownerReferences).toEqual([
    expect.objectContaining({ apiVersion: 'gatehouse.dev/v1alpha1', kind: cr.kind, name: cr.metadata.name, uid: cr.metadata.uid }),
  ]);
  return secret;
}

const secretValue = (secret: any, key: string): string => Buffer.from(secret.data[key], 'base64').toString('utf8');

function condition(cr: any, type: string): any {
  return (cr?.status?.conditions ?? []).find((c: any) => c.type === type);
}

async function waitForCondition(name: string, type: string, predicate: (c: any) => boolean, what: string): Promise<any> {
  return pollUntil(
    async () => {
      const c = condition(await readCr(name), type);
      return c && predicate(c) ? c : undefined;
    },
    { what: `${name} ${type}: ${what}`, timeoutMs: 30_000, intervalMs: 200, details: logs },
  );
}

async function readLease(): Promise<any> {
  return admin.custom.getNamespacedCustomObject({ group: 'coordination.k8s.io', version: 'v1', namespace: NAMESPACE, plural: 'leases', name: LEASE_NAME });
}

async function leaseHolder(): Promise<string | undefined> {
  return (await readLease()).spec?.holderIdentity ?? undefined;
}

// The Leases in which each replica reports its own data planes to the leader.
const REPORT_SELECTOR = `${REPORT_LABEL}=${LEASE_NAME}`;

/**
 * Waits for the fleet beforeAll started, as every test needs it whatever ran before (randomized order): both
 * replicas ready and talking to the apiserver again, one of them leading, each DP connected to its own
 * replica with the current snapshot ACKed, and the leader seeing exactly those DPs in the reports. Tests stop,
 * pause or restart the apiserver, kill a replica, pause a DP or run extra replicas; the replicas and DPs
 * recover on their own, but not at once (a DP reconnects with backoff, a report is published 200 ms after an
 * ACK), and what the apiserver still holds meanwhile is stale: a Lease naming a replica that stepped down
 * while it hung, reports written before it.
 */
async function fleetSettled(): Promise<void> {
  let waiting = '';
  const not = (why: string): undefined => {
    waiting = why;
    return undefined;
  };
  await pollUntil(
    async () => {
      const ready = await Promise.all(
        clients.map((c) =>
          c
            .readyz()
            .then((r) => r.status)
            .catch(() => 0),
        ),
      );
      if (ready.some((status) => status !== 200)) return not(`replica /readyz: ${ready.join(', ')}`);
      // The leader renews every LEASE_DURATION / 5: a renewal this recent means it is leading now.
      const lease = await readLease();
      const holder = lease.spec?.holderIdentity;
      const renewedAgo = Date.now() - Date.parse(lease.spec?.renewTime ?? '');
      if (!cps.some((cp) => cp.name === holder) || !(renewedAgo < LEASE_DURATION_MS)) return not(`lease held by ${holder}, renewed ${renewedAgo} ms ago`);
      const hashes = (await Promise.all(dps.map((dp) => dp.readyz()))).map((r) => r.hash);
      if (!hashes[0] || new Set(hashes).size !== 1) return not(`DP hashes ${hashes.join(', ')}`);
      for (const [i, client] of clients.entries()) {
        const own = (await client.dataplanes()).body;
        if (!own.some((dp: any) => dp.id === dps[i].id && dp.last_ack && dp.hash === hashes[0])) return not(`${cps[i].name} lists ${JSON.stringify(own)}`);
      }
      const leases = (
        (await admin.custom.listNamespacedCustomObject({
          group: 'coordination.k8s.io',
          version: 'v1',
          namespace: NAMESPACE,
          plural: 'leases',
          labelSelector: REPORT_SELECTOR,
        })) as any
      ).items;
      const reports = leases.map((l: any) => ({
        holder: l.spec?.holderIdentity,
        age: Date.now() - Date.parse(l.spec?.renewTime ?? ''),
        dataPlanes: JSON.parse(l.metadata.annotations?.[REPORT_ANNOTATION] ?? '[]') as any[],
      }));
      // A report is renewed every LEASE_DURATION: one as recent as two says its replica reaches the apiserver now.
      // It names the store's hash of the revision its DP acked (a DP's own hash also covers the key_auth installation
      // key once there are API keys): the same on every replica when the DPs hold the same content.
      const acked = new Set<string>();
      for (const [i, cp] of cps.entries()) {
        const report = reports.find((r: any) => r.holder === cp.name);
        const own = report?.dataPlanes.find((dp: any) => dp.id === dps[i].id);
        if (!(report?.age < 2 * LEASE_DURATION_MS) || !own?.ackedHash) return not(`${cp.name} reports ${JSON.stringify(report)}`);
        acked.add(own.ackedHash);
      }
      if (acked.size !== 1) return not(`reports name acked hashes ${[...acked].join(', ')}`);
      // The leader counts a report until it is three LEASE_DURATIONs old: one a stopped replica of another test left may still name its DP.
      const strangers = reports
        .filter((r: any) => r.age < 3 * LEASE_DURATION_MS)
        .flatMap((r: any) => r.dataPlanes.map((dp: any) => dp.id))
        .filter((id: string) => !dps.some((dp) => dp.id === id));
      if (strangers.length > 0) return not(`reports still name ${strangers.join(', ')}`);
      return true;
    },
    { what: 'the fleet settled', timeoutMs: 60_000, intervalMs: 200, details: () => `${waiting}\n${logs()}` },
  );
}

beforeAll(async () => {
  server = await startKubeApiServer();
  admin = await kubeClients(await server.writeKubeconfig(server.adminToken));
  await installCrds(admin);
  identity = await controlPlaneIdentity(server, admin, NAMESPACE);
  upstream = await startUpstream('k8s-upstream');
  cps.push(await startReplica('cp-a'), await startReplica('cp-b'));
  for (const cp of cps) {
    dps.push(await startDataPlane({ controlPlaneAddr: cp.grpcAddr, id: `dp-of-${cp.name}` }));
    const client = await createAdminClient(cp);
    await client.login();
    clients.push(client);
  }
}, 180_000);

beforeEach(fleetSettled, 90_000);

afterAll(async () => {
  await Promise.allSettled(dps.map((dp) => dp.stop()));
  await Promise.allSettled(cps.map((cp) => cp.dispose()));
  await upstream?.close();
  await server?.stop();
});

test('CRDs are installed and Established', async () => {
  for (const name of ['apidefinitions.gatehouse.dev', 'oauthservers.gatehouse.dev', 'basicauthcredentials.gatehouse.dev', 'keyauthcredentials.gatehouse.dev']) {
    const crd = (await admin.objects.read({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', metadata: { name } })) as any;
    expect(crd.status.conditions.find((c: any) => c.type === 'Established')?.status).toBe('True');
  }
});

test('admin write on one replica → a CR exists → every DP serves it', async () => {
  const res = await clients[0].createApi(apiDefinition({ name: 'Orders_V1', listenPath: '/orders/*', targets: [upstream.url] }));
  expect(res.status).toBe(201);
  // Read-your-writes: the same replica shows it at once.
  expect((await clients[0].getApi('Orders_V1')).status).toBe(200);
  const items = ((await admin.custom.listNamespacedCustomObject(APIS)) as any).items;
  const cr = items.find((i: any) => i.spec.name === 'Orders_V1');
  expect(cr.metadata.name).toMatch(/^orders-v1-[0-9a-f]{8}$/);
  expect(cr.spec.proxy.listen_path).toBe('/orders/*');
  for (const dp of dps) await served(dp, '/orders/1');
  // The other replica sees it through its informer.
  await pollUntil(async () => ((await clients[1].getApi('Orders_V1')).status === 200 ? true : undefined), { what: 'cp-b shows Orders_V1' });
});

test('a basic_auth user created through the admin API is a BasicAuthCredential CR referencing its hash in a Secret it owns, and authenticates on every DP', async () => {
  const basic = (secret: string) => ({ headers: { authorization: `Basic ${Buffer.from(`Ops@Example.com:${secret}`).toString('base64')}` } });
  const api = await clients[0].createApi({
    ...apiDefinition({ name: 'k8s-basic', listenPath: '/k8s-basic/*', targets: [upstream.url] }),
    plugins: [{ name: 'basic_auth' }],
  });
  expect(api.status).toBe(201);
  const user = await clients[0].request('POST', '/credentials/basic_auth', { body: { username: 'Ops@Example.com', password: 'k8s password 1' } });
  expect(user.status).toBe(201);
  const cr = ((await admin.custom.listNamespacedCustomObject({ ...GROUP, plural: 'basicauthcredentials' })) as any).items.find(
    (i: any) => i.spec.username === 'Ops@Example.com',
  );
  expect(cr.metadata.name).toMatch(/^ops-example.com-[0-9a-f]{8}$/);
  expect(cr.spec).toEqual({
    username: 'Ops@Example.com',
    password_hash_secret_ref: { name: `gatehouse-basicauthcredential-${cr.metadata.name}`, key: 'password_hash' },
  });
  const hashOf = async () => secretValue(await readOwnedSecret(cr), 'password_hash');
  expect(await hashOf()).toMatch(/^scrypt\$/);
  expect(JSON.stringify(cr)).not.toContain('k8s password 1');
  for (const dp of dps) {
    await pollUntil(async () => ((await dp.request('GET', '/k8s-basic/x', basic('k8s password 1'))).status === 200 ? true : undefined), {
      what: `${dp.id} authenticates the basic_auth user`,
      timeoutMs: 20_000,
      details: logs,
    });
    const refused = await dp.request('GET', '/k8s-basic/x', basic('wrong password'));
    expect(refused.status).toBe(401);
    expect(refused.headers['www-authenticate']).toBe('Basic realm="Restricted", charset="UTF-8"');
  }
  // The other replica lists it (never with the hash).
  await pollUntil(async () => ((await clients[1].request('GET', '/credentials/basic_auth')).body?.length === 1 ? true : undefined), {
    what: 'cp-b lists the user',
  });
  expect((await clients[1].request('GET', '/credentials/basic_auth')).body).toEqual([{ username: 'Ops@Example.com' }]);
  // A password change through the other replica refuses the old one on every DP.
  expect((await clients[1].request('PUT', '/credentials/basic_auth/Ops%40Example.com', { body: { password: 'k8s password 2' } })).status).toBe(200);
  for (const dp of dps) {
    await pollUntil(async () => ((await dp.request('GET', '/k8s-basic/x', basic('k8s password 1'))).status === 401 ? true : undefined), {
      what: `${dp.id} refuses the old password`,
      timeoutMs: 20_000,
      details: logs,
    });
    expect((await dp.request('GET', '/k8s-basic/x', basic('k8s password 2'))).status).toBe(200);
  }
  // The new hash is in the same Secret; the spec did not change.
  expect(await hashOf()).toMatch(/^scrypt\$/);
  expect(((await admin.custom.getNamespacedCustomObject({ ...GROUP, plural: 'basicauthcredentials', name: cr.metadata.name })) as any).spec).toEqual(cr.spec);
  // The controller reports on it like on the other kinds.
  const credential = { ...GROUP, plural: 'basicauthcredentials', name: cr.metadata.name };
  await pollUntil(async () => (condition(await admin.custom.getNamespacedCustomObject(credential), 'Accepted')?.status === 'True' ? true : undefined), {
    what: 'BasicAuthCredential Accepted=True',
    timeoutMs: 30_000,
    details: logs,
  });
});

test('a key_auth credential created through the admin API is a KeyAuthCredential CR referencing its digest in a Secret; a CR with the same key is Conflicted', async () => {
  const api = await clients[0].createApi({
    ...apiDefinition({ name: 'k8s-key', listenPath: '/k8s-key/*', targets: [upstream.url] }),
    plugins: [{ name: 'key_auth' }],
  });
  expect(api.status).toBe(201);
  const created = await clients[0].request('POST', '/credentials/key_auth', { body: { username: 'Svc@Example.com' } });
  expect(created.status).toBe(201);
  const key = created.body.key as string;
  expect(key).toMatch(/^[A-Za-z0-9_-]{43}$/);
  const keys = { ...GROUP, plural: 'keyauthcredentials' };
  const cr = ((await admin.custom.listNamespacedCustomObject(keys)) as any).items.find((i: any) => i.spec.username === 'Svc@Example.com');
  expect(cr.metadata.name).toMatch(/^svc-example.com-[0-9a-f]{8}$/);
  expect(Object.keys(cr.spec).sort()).toEqual(['key_hash_secret_ref', 'username']);
  const keyHash = secretValue(await readOwnedSecret(cr), 'key_hash');
  expect(keyHash).toBe(`hmac-sha256$${createHmac('sha256', keyAuthHashKey).update(key).digest('base64url')}`);
  expect(JSON.stringify(cr)).not.toContain(key);
  for (const dp of dps) {
    await pollUntil(async () => ((await dp.request('GET', '/k8s-key/x', { headers: { apikey: key } })).status === 200 ? true : undefined), {
      what: `${dp.id} admits the API key`,
      timeoutMs: 20_000,
      details: logs,
    });
    const refused = await dp.request('GET', '/k8s-key/x', { headers: { apikey: 'not-the-key-0123456789' } });
    expect(refused.status).toBe(401);
    expect(refused.headers['www-authenticate']).toBe('Key realm="Restricted"');
  }
  // Other tests' credentials may be listed too (each test's own, when it failed before its clean-up): this one's is looked for.
  const listsIt = async () =>
    ((await clients[1].request('GET', '/credentials/key_auth')).body as Array<{ username: string }> | undefined)?.some((c) => c.username === 'Svc@Example.com');
  await pollUntil(async () => ((await listsIt()) ? true : undefined), { what: 'cp-b lists the credential', details: logs });
  expect((await clients[1].request('GET', '/credentials/key_auth')).body).toContainEqual({ username: 'Svc@Example.com' });
  // A younger CR written with kubectl that holds the same key is refused (the older one keeps it), and the key still names the first.
  await admin.objects.create({
    apiVersion: 'gatehouse.dev/v1alpha1',
    kind: 'KeyAuthCredential',
    // Named to sort after the first: created within the same second, creation time ties and the name decides.
    metadata: { name: 'zz-key-copy', namespace: NAMESPACE },
    spec: { username: 'copycat', key_hash: keyHash },
  } as KubernetesObject);
  const copy = { ...keys, name: 'zz-key-copy' };
  const accepted = await pollUntil(
    async () => {
      const c = condition(await admin.custom.getNamespacedCustomObject(copy), 'Accepted');
      return c?.status === 'False' ? c : undefined;
    },
    { what: 'zz-key-copy Accepted=False', timeoutMs: 30_000, details: logs },
  );
  expect(accepted.reason).toBe('Conflicted');
  expect(accepted.message).toContain('api key is already registered');
  for (const dp of dps) {
    expect((await dp.request('GET', '/k8s-key/x', { headers: { apikey: key } })).status).toBe(200);
  }
  await admin.custom.deleteNamespacedCustomObject(copy);
});

test("a KeyAuthCredential CR's groups (kubectl apply) are the consumer's: the admin API shows them normalised, acl judges by them, a patch of them reaches every DP", async () => {
  const api = await clients[0].createApi({
    ...apiDefinition({ name: 'k8s-acl', listenPath: '/k8s-acl/*', targets: [upstream.url] }),
    plugins: [{ name: 'key_auth' }, { name: 'acl', config: { allow: ['admins'] } }],
  });
  expect(api.status).toBe(201);
  const key = 'k8s-acl-key-0123456789';
  const keys = { ...GROUP, plural: 'keyauthcredentials' };
  await admin.objects.create({
    apiVersion: 'gatehouse.dev/v1alpha1',
    kind: 'KeyAuthCredential',
    metadata: { name: 'k8s-acl-user', namespace: NAMESPACE },
    spec: { username: 'k8s-acl-user', key_hash: `sha256$${createHash('sha256').update(key).digest('base64url')}`, groups: ['Admins', 'ops'] },
  } as KubernetesObject);
  const judged = async (dp: DataPlane, status: number, groups?: string) =>
    pollUntil(
      async () => {
        const res = await dp.request('GET', '/k8s-acl/x', { headers: { apikey: key } });
        return res.status === status && (groups === undefined || upstream.last()?.headers['x-consumer-groups'] === groups) ? true : undefined;
      },
      { what: `${dp.id} answers ${status}`, timeoutMs: 20_000, details: logs },
    );
  for (const dp of dps) await judged(dp, 200, 'admins, ops');
  expect((await clients[1].request('GET', '/credentials/key_auth/k8s-acl-user')).body).toEqual({ username: 'k8s-acl-user', groups: ['admins', 'ops'] });
  await editSpec(keys, 'k8s-acl-user', (spec) => ({ ...spec, groups: ['ops'] }));
  for (const dp of dps) await judged(dp, 403);
  await admin.custom.deleteNamespacedCustomObject({ ...keys, name: 'k8s-acl-user' });
});

test('an HS key written through the admin API is in a Secret the OAuthServer CR owns, never in its spec or status; both replicas show the marker; a PUT of what they show keeps the key', async () => {
  const HS = 'k8s-hs-key-0123456789-abcdefghijklmnop';
  const endpoint = { listen_path: '/k8s-idp/token', upstreams: { targets: [{ target: `${upstream.url}/token` }] }, methods: ['POST'] };
  const created = await clients[0].createOAuthServer({
    name: 'k8s-idp',
    oauth_endpoints: { token: endpoint },
    token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: HS }] },
  });
  expect(created.status).toBe(201);
  expect(created.body.token_strategy.settings).toEqual([{ alg: 'HS256', key: '<redacted>' }]);
  const api = await clients[0].createApi(
    apiDefinition({ name: 'k8s-jwt', listenPath: '/k8s-jwt/*', targets: [upstream.url], plugins: [{ name: 'oauth2', config: { server_name: 'k8s-idp' } }] }),
  );
  expect(api.status).toBe(201);
  const servers = { ...GROUP, plural: 'oauthservers' };
  const cr = (await admin.custom.getNamespacedCustomObject({ ...servers, name: 'k8s-idp' })) as any;
  expect(cr.spec.token_strategy.settings).toEqual([
    { alg: 'HS256', key_secret_ref: { name: 'gatehouse-oauthserver-k8s-idp', key: 'token_strategy.settings.0.key' } },
  ]);
  expect(secretValue(await readOwnedSecret(cr), 'token_strategy.settings.0.key')).toBe(HS);
  const token = await new SignJWT({ sub: 'k8s-user' }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('5m').sign(new TextEncoder().encode(HS));
  const admitted = async (dp: DataPlane) =>
    pollUntil(async () => ((await dp.request('GET', '/k8s-jwt/x', { headers: { authorization: `Bearer ${token}` } })).status === 200 ? true : undefined), {
      what: `${dp.id} admits the JWT`,
      timeoutMs: 20_000,
      details: logs,
    });
  for (const dp of dps) await admitted(dp);

  const shown = await pollUntil(async () => ((r) => (r.status === 200 ? r : undefined))(await clients[1].getOAuthServer('k8s-idp')), {
    what: 'cp-b shows k8s-idp',
    details: logs,
  });
  expect(shown.body.token_strategy.settings).toEqual([{ alg: 'HS256', key: '<redacted>' }]);
  const updated = await clients[1].updateOAuthServer('k8s-idp', { ...shown.body, token_strategy: { ...shown.body.token_strategy, leeway: 3 } });
  expect(updated.status).toBe(200);
  const after = (await admin.custom.getNamespacedCustomObject({ ...servers, name: 'k8s-idp' })) as any;
  expect(after.spec.token_strategy).toMatchObject({ leeway: 3, settings: cr.spec.token_strategy.settings });
  expect(secretValue(await readOwnedSecret(after), 'token_strategy.settings.0.key')).toBe(HS);
  for (const dp of dps) await admitted(dp);
  await pollUntil(
    async () => (condition(await admin.custom.getNamespacedCustomObject({ ...servers, name: 'k8s-idp' }), 'Accepted')?.status === 'True' ? true : undefined),
    {
      what: 'k8s-idp Accepted=True',
      timeoutMs: 30_000,
      details: logs,
    },
  );
  expect(JSON.stringify(await admin.custom.getNamespacedCustomObject({ ...servers, name: 'k8s-idp' }))).not.toContain(HS);
  expect((await clients[0].deleteApi('k8s-jwt')).status).toBe(204);
  expect((await clients[0].deleteOAuthServer('k8s-idp')).status).toBe(204);
});

test('a CR written with kubectl may reference its own Secret: missing, it is Accepted=False SecretNotFound; created, served; updated, every DP follows; an admin edit keeps the reference', async () => {
  const api = await clients[0].createApi({
    ...apiDefinition({ name: 'k8s-ref', listenPath: '/k8s-ref/*', targets: [upstream.url] }),
    plugins: [{ name: 'key_auth' }],
  });
  expect(api.status).toBe(201);
  const digest = (key: string) => Buffer.from(`sha256$${createHash('sha256').update(key).digest('base64url')}`).toString('base64');
  const [first, second] = ['k8s-ref-key-one-0123456789', 'k8s-ref-key-two-0123456789'];
  const keys = { ...GROUP, plural: 'keyauthcredentials' };
  await admin.objects.create({
    apiVersion: 'gatehouse.dev/v1alpha1',
    kind: 'KeyAuthCredential',
    metadata: { name: 'ref-user', namespace: NAMESPACE },
    spec: { username: 'ref-user', key_hash_secret_ref: { name: 'ref-user-key', key: 'digest' } },
  } as KubernetesObject);
  const missing = await pollUntil(
    async () => {
      const c = condition(await admin.custom.getNamespacedCustomObject({ ...keys, name: 'ref-user' }), 'Accepted');
      return c?.status === 'False' ? c : undefined;
    },
    { what: 'ref-user Accepted=False', timeoutMs: 30_000, details: logs },
  );
  expect(missing).toMatchObject({ reason: 'SecretNotFound', message: 'key_hash_secret_ref: Secret "ref-user-key" does not exist in this namespace' });
  for (const cp of cps) expect(cp.process.running()).toBe(true);

  const secret = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'ref-user-key', namespace: NAMESPACE }, data: { digest: digest(first) } };
  await admin.objects.create(secret as KubernetesObject);
  const answers = async (dp: DataPlane, key: string, status: number) =>
    pollUntil(async () => ((await dp.request('GET', '/k8s-ref/x', { headers: { apikey: key } })).status === status ? true : undefined), {
      what: `${dp.id} answers ${status} to ${key}`,
      timeoutMs: 20_000,
      details: logs,
    });
  for (const dp of dps) await answers(dp, first, 200);
  await admin.objects.replace({ ...secret, data: { digest: digest(second) } } as KubernetesObject);
  for (const dp of dps) {
    await answers(dp, second, 200);
    await answers(dp, first, 401);
  }
  // The admin API edits the groups; the CR still takes its digest from the user's Secret.
  expect((await clients[1].request('PUT', '/credentials/key_auth/ref-user', { body: { groups: ['ops'] } })).status).toBe(200);
  const cr = (await admin.custom.getNamespacedCustomObject({ ...keys, name: 'ref-user' })) as any;
  expect(cr.spec).toEqual({ username: 'ref-user', groups: ['ops'], key_hash_secret_ref: { name: 'ref-user-key', key: 'digest' } });
  for (const dp of dps) await answers(dp, second, 200);
  await admin.custom.deleteNamespacedCustomObject({ ...keys, name: 'ref-user' });
  await admin.objects.delete(secret as KubernetesObject);
  expect((await clients[0].deleteApi('k8s-ref')).status).toBe(204);
});

test('an OAuthServer applied with kubectl is held to the HS key length admin writes are: short, Accepted=False Invalid naming the field and not served; 32 bytes, Accepted', async () => {
  const servers = { ...GROUP, plural: 'oauthservers' };
  const withKey = (key: string) => ({
    apiVersion: 'gatehouse.dev/v1alpha1',
    kind: 'OAuthServer',
    metadata: { name: 'kubectl-idp', namespace: NAMESPACE },
    spec: {
      name: 'kubectl-idp',
      oauth_endpoints: { token: { listen_path: '/kubectl-idp/token', upstreams: { targets: [{ target: upstream.url }] }, methods: ['POST'] } },
      token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key }] },
    },
  });
  await admin.objects.create(withKey('secret') as KubernetesObject);
  const refused = await pollUntil(
    async () => {
      const c = condition(await admin.custom.getNamespacedCustomObject({ ...servers, name: 'kubectl-idp' }), 'Accepted');
      return c?.status === 'False' ? c : undefined;
    },
    { what: 'kubectl-idp Accepted=False', timeoutMs: 30_000, details: logs },
  );
  expect(refused).toMatchObject({ reason: 'Invalid', message: expect.stringContaining('token_strategy.settings[0].key is shorter than 32 bytes') });
  expect(refused.message).toContain('ALLOW_SHORT_HMAC_KEYS=true');
  expect((await clients[1].getOAuthServer('kubectl-idp')).status).toBe(404);

  const current = (await admin.custom.getNamespacedCustomObject({ ...servers, name: 'kubectl-idp' })) as any;
  await admin.objects.replace({ ...withKey('a-shared-secret-of-32-bytes-or-more'), metadata: current.metadata } as KubernetesObject);
  await pollUntil(
    async () =>
      condition(await admin.custom.getNamespacedCustomObject({ ...servers, name: 'kubectl-idp' }), 'Accepted')?.status === 'True' ? true : undefined,
    { what: 'kubectl-idp Accepted=True', timeoutMs: 30_000, details: logs },
  );
  expect((await clients[1].getOAuthServer('kubectl-idp')).status).toBe(200);
  await admin.custom.deleteNamespacedCustomObject({ ...servers, name: 'kubectl-idp' });
});

test('a CR written with the Kubernetes API (kubectl apply) → every DP serves it, the admin API lists it', async () => {
  await admin.objects.create(crFor('kubectl-made', { proxy: { listen_path: '/kubectl/*', upstreams: { targets: [{ target: upstream.url }] } } }));
  for (const dp of dps) await served(dp, '/kubectl/x');
  const listed = await clients[1].listApis();
  expect(listed.body.find((a: any) => a.name === 'kubectl-made')).toMatchObject({ active: true, proxy: { listen_path: '/kubectl/*', strip_path: false } });
  const accepted = await waitForCondition('kubectl-made', 'Accepted', (c) => c.status === 'True', 'True');
  expect(accepted.observedGeneration).toBe(1);
  const programmed = await waitForCondition('kubectl-made', 'Programmed', (c) => c.status === 'True', 'True');
  expect(programmed.message).toBe('served by every synced data plane');
});

test('a health check in a CR: the apiserver holds it to the CRD schema generated from ours, the gateway serves it with its defaults', async () => {
  const checked = {
    listen_path: '/kubectl-checked/*',
    upstreams: { targets: [{ target: upstream.url }], health_check: { passive: { unhealthy_threshold: 2 } } },
  };
  await admin.objects.create(crFor('kubectl-checked', { proxy: checked }));
  for (const dp of dps) await served(dp, '/kubectl-checked/x');
  expect((await clients[1].getApi('kubectl-checked')).body.proxy.upstreams.health_check).toEqual({ passive: { unhealthy_threshold: 2, ejection: '30s' } });
  const badPath = { ...checked, listen_path: '/kubectl-bad-check/*', upstreams: { ...checked.upstreams, health_check: { active: { path: 'no-slash' } } } };
  await expect(admin.objects.create(crFor('kubectl-bad-check', { proxy: badPath }))).rejects.toThrow(/health_check\.active\.path/);
  // A map (the probe's headers) is kept by the apiserver, not pruned as an unknown field; its values are checked.
  const probe = { path: '/h', interval: '1h', method: 'HEAD', statuses: [204, 200], headers: { Host: 'health.internal', 'X-Probe': '1' } };
  const withHeaders = { ...checked, listen_path: '/kubectl-probe-headers/*', upstreams: { ...checked.upstreams, health_check: { active: probe } } };
  await admin.objects.create(crFor('kubectl-probe-headers', { proxy: withHeaders }));
  const stored = await pollUntil(async () => (await clients[1].getApi('kubectl-probe-headers')).body?.proxy?.upstreams?.health_check, {
    what: 'kubectl-probe-headers through the store',
  });
  expect(stored.active).toMatchObject({ method: 'HEAD', statuses: [200, 204], headers: { Host: 'health.internal', 'X-Probe': '1' } });
  const badValue = {
    ...withHeaders,
    listen_path: '/kubectl-bad-header/*',
    upstreams: { ...checked.upstreams, health_check: { active: { path: '/h', headers: { 'X-Probe': 'a\u0001b' } } } },
  };
  await expect(admin.objects.create(crFor('kubectl-bad-header', { proxy: badValue }))).rejects.toThrow(/health_check\.active\.headers/);
});

test('header conditions in a CR: the apiserver keeps the map and checks its values; the gateway routes on them', async () => {
  // A headers-only API (no listen_path): it routes only requests that carry the header.
  const proxy = { match_headers: { 'X-K8s-Tenant': ['acme'] }, upstreams: { targets: [{ target: upstream.url }] } };
  await admin.objects.create(crFor('kubectl-tenant', { proxy }));
  for (const dp of dps) {
    await pollUntil(async () => ((await dp.request('GET', '/kubectl-tenant/x', { headers: { 'x-k8s-tenant': 'acme' } })).status === 200 ? true : undefined), {
      what: `${dp.id} routing X-K8s-Tenant: acme`,
      timeoutMs: 20_000,
      details: logs,
    });
    expect((await dp.request('GET', '/kubectl-tenant/x', { headers: { 'x-k8s-tenant': 'other' } })).status).toBe(404);
  }
  expect((await clients[1].getApi('kubectl-tenant')).body.proxy.match_headers).toEqual({ 'x-k8s-tenant': ['acme'] });
  const bad = { ...proxy, match_headers: { 'X-K8s-Tenant': [' acme'] } };
  await expect(admin.objects.create(crFor('kubectl-bad-tenant', { proxy: bad }))).rejects.toThrow(/match_headers/);
  await admin.custom.deleteNamespacedCustomObject({ ...APIS, name: 'kubectl-tenant' });
});

test('balancing hash in a CR: the apiserver keeps hash_on (not pruned) and checks its source; the gateway stores it with its defaults', async () => {
  const proxy = {
    listen_path: '/kubectl-hashed/*',
    upstreams: { balancing: 'hash', hash_on: { source: 'ip' }, targets: [{ target: upstream.url }, { target: `${upstream.url}/b` }] },
  };
  await admin.objects.create(crFor('kubectl-hashed', { proxy }));
  for (const dp of dps) await served(dp, '/kubectl-hashed/x');
  expect((await clients[1].getApi('kubectl-hashed')).body.proxy.upstreams.hash_on).toEqual({ source: 'ip', trust_forward_headers: false });
  const bad = { ...proxy, listen_path: '/kubectl-bad-hash/*', upstreams: { ...proxy.upstreams, hash_on: { source: 'query' } } };
  await expect(admin.objects.create(crFor('kubectl-bad-hash', { proxy: bad }))).rejects.toThrow(/hash_on\.source/);
  await admin.custom.deleteNamespacedCustomObject({ ...APIS, name: 'kubectl-hashed' });
});

test('Programmed waits for the data planes of every replica: one paused behind the non-leader keeps a new CR Pending until it resumes', async () => {
  const holder = await pollUntil(async () => leaseHolder(), { what: 'a lease holder' });
  const leaderDp = dps[cps.findIndex((cp) => cp.name === holder)];
  const followerDp = dps[cps.findIndex((cp) => cp.name !== holder)];
  // Stopped, its stream stays open (the CP's keepalive gives up 5 s after its next ping at the earliest), so its
  // replica keeps reporting it with the snapshot it last ACKed.
  process.kill(followerDp.process.pid, 'SIGSTOP');
  try {
    await admin.objects.create(crFor('paused-fleet', { proxy: { listen_path: '/paused-fleet/*', upstreams: { targets: [{ target: upstream.url }] } } }));
    await served(leaderDp, '/paused-fleet/x');
    // The leader's own data plane serves it; a leader counting only its own would now write Programmed.
    await delay(1500);
    expect(condition(await readCr('paused-fleet'), 'Programmed')).toMatchObject({ status: 'False', reason: 'Pending', observedGeneration: 1 });
  } finally {
    process.kill(followerDp.process.pid, 'SIGCONT');
  }
  await waitForCondition('paused-fleet', 'Programmed', (c) => c.status === 'True', 'True once the paused data plane has ACKed');
  await served(followerDp, '/paused-fleet/x');
});

test('an invalid CR → Accepted=False naming the field; the others keep serving; fixing it programs it', async () => {
  await admin.objects.create(crFor('beside-broken', { proxy: { listen_path: '/beside-broken/*', upstreams: { targets: [{ target: upstream.url }] } } }));
  for (const dp of dps) await served(dp, '/beside-broken/1');
  await admin.objects.create(crFor('broken', { proxy: { listen_path: '/broken/*', upstreams: { targets: [{ target: 'not a url' }] } } }));
  const accepted = await waitForCondition('broken', 'Accepted', (c) => c.status === 'False', 'False');
  expect(accepted.reason).toBe('Invalid');
  expect(accepted.message).toContain('proxy.upstreams.targets[0].target');
  expect(condition(await readCr('broken'), 'Programmed')).toMatchObject({ status: 'False', reason: 'Invalid' });
  for (const dp of dps) {
    await served(dp, '/beside-broken/2');
    expect((await dp.request('GET', '/broken/x')).status).toBe(404);
  }
  const hashes = new Set((await Promise.all(dps.map((dp) => dp.readyz()))).map((r) => r.hash));
  expect(hashes.size).toBe(1);

  await editSpec(APIS, 'broken', (spec) => ({ ...spec, proxy: { ...spec.proxy, upstreams: { targets: [{ target: upstream.url }] } } }));
  const fixed = await waitForCondition('broken', 'Accepted', (c) => c.status === 'True', 'True after the fix');
  expect(fixed.observedGeneration).toBe(2);
  for (const dp of dps) await served(dp, '/broken/x');
});

test('a replica that followed CR changes one by one holds what a replica listing them all at once holds (conflicts, references, renames, deletes)', async () => {
  const api = (listenPath: string, extra: Record<string, unknown> = {}) => ({
    proxy: { listen_path: listenPath, upstreams: { targets: [{ target: upstream.url }] } },
    ...extra,
  });
  const replace = (name: string, spec: Record<string, unknown>) => editSpec(APIS, name, () => spec);
  // Each step on its own, so that each is one pass of the replicas' stores: those a change of a few
  // CRs can decide, and those where ranks must (a taken name or route, a missing OAuth server).
  const steps: Array<() => Promise<unknown>> = [
    () => admin.objects.create(crFor('inc-a', api('/inc-a/*'))),
    () => admin.objects.create(crFor('inc-b', api('/inc-b/*', { name: 'inc-a' }))), // name taken by the older inc-a
    () => replace('inc-b', api('/inc-b/*', { name: 'inc-b' })), // renamed: accepted
    () => admin.objects.create(crFor('inc-c', api('/inc-a/*'))), // route taken by inc-a
    () => admin.objects.create(crFor('inc-g', api('/inc-g/*'))), // beside a refused CR, touching nothing it stands on
    () =>
      replace(
        'inc-b',
        api('/inc-b/*', { name: 'inc-b', proxy: { listen_path: '/inc-b/*', strip_path: true, upstreams: { targets: [{ target: upstream.url }] } } }),
      ),
    () => admin.objects.create(crFor('inc-i', api('/inc-a/*'))), // the contested route again, younger than inc-c
    () => admin.objects.delete(crFor('inc-a', {})), // inc-c, the older of the two, takes the route over
    () => admin.objects.create(crFor('inc-d', api('/inc-d/*', { plugins: [{ name: 'oauth2', enabled: true, config: { server_name: 'inc-auth' } }] }))),
    () => admin.objects.create(crFor('inc-h', api('/inc-h/*'))),
    () =>
      admin.objects.create({
        apiVersion: 'gatehouse.dev/v1alpha1',
        kind: 'OAuthServer',
        metadata: { name: 'inc-auth', namespace: NAMESPACE },
        spec: {
          oauth_endpoints: { token: { listen_path: '/inc-auth/token', upstreams: { targets: [{ target: upstream.url }] } } },
          token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: randomBytes(32).toString('hex') }] },
        },
      } as KubernetesObject), // inc-d's reference resolves
    () => replace('inc-c', api('/inc-a/*', { proxy: { listen_path: '/inc-a/*', upstreams: { targets: [{ target: `${upstream.url}/moved` }] } } })),
    () => admin.objects.create(crFor('inc-e', api('/inc-e/*', { proxy: { listen_path: '/inc-e/*', upstreams: { targets: [{ target: 'not a url' }] } } }))),
    () => admin.objects.create(crFor('inc-f', api('/inc-f/*'))),
    () => admin.objects.delete(crFor('inc-f', {})),
  ];
  for (const step of steps) {
    await step();
    await delay(300);
  }
  await served(dps[0], '/inc-a/x');
  await served(dps[0], '/inc-b/x');
  await served(dps[0], '/inc-f/x', true);
  await waitForCondition('inc-d', 'Accepted', (c) => c.status === 'True', 'True once its OAuth server exists');

  const fresh = await startReplica('cp-c');
  const freshDp = await startDataPlane({ controlPlaneAddr: fresh.grpcAddr, id: 'dp-of-cp-c' });
  try {
    const client = await createAdminClient(fresh);
    await client.login();
    await served(freshDp, '/inc-a/x');
    const hashes = await pollUntil(
      async () => {
        const all = (await Promise.all([...dps, freshDp].map((dp) => dp.readyz()))).map((r) => r.hash);
        return new Set(all).size === 1 ? all : undefined;
      },
      { what: 'every DP, of the replicas that followed and of the one that listed, on one hash', details: logs },
    );
    expect(hashes).toHaveLength(3);
    const names = async (c: AdminClient) =>
      ((await c.listApis()).body as Array<{ name: string }>)
        .map((a) => a.name)
        .filter((n) => n.startsWith('inc-'))
        .sort();
    expect(await names(clients[0])).toEqual(['inc-b', 'inc-c', 'inc-d', 'inc-g', 'inc-h']);
    expect((await waitForCondition('inc-i', 'Accepted', (c) => c.status === 'False', 'False')).reason).toBe('Conflicted');
    expect(await names(client)).toEqual(await names(clients[0]));
    expect(((await client.listApis()).body as any[]).find((a) => a.name === 'inc-c').proxy.upstreams.targets[0].target).toBe(`${upstream.url}/moved`);
  } finally {
    await freshDp.stop();
    await fresh.dispose();
  }
});

test('the same name created on both replicas at once: one 201, one 409', async () => {
  const def = (n: number) => apiDefinition({ name: 'raced', listenPath: `/raced-${n}/*`, targets: [upstream.url] });
  const [a, b] = await Promise.all([clients[0].createApi(def(1)), clients[1].createApi(def(2))]);
  expect([a.status, b.status].sort()).toEqual([201, 409]);
  expect((a.status === 409 ? a : b).body.error).toBe('api name is already registered');
});

test('concurrent PATCHes on two replicas never lose an update silently', async () => {
  expect((await clients[0].createApi(apiDefinition({ name: 'patched', listenPath: '/patched/*', targets: [upstream.url] }))).status).toBe(201);
  await pollUntil(async () => ((await clients[1].getApi('patched')).status === 200 ? true : undefined), { what: 'cp-b sees patched' });
  let conflicts = 0;
  for (let round = 0; round < 5; round++) {
    const [a, b] = await Promise.all([
      clients[0].patchApi('patched', { proxy: { strip_path: round % 2 === 0 } }),
      clients[1].patchApi('patched', { proxy: { append_path: round % 2 === 0 } }),
    ]);
    for (const r of [a, b]) expect([200, 409]).toContain(r.status);
    conflicts += [a, b].filter((r) => r.status === 409).length;
    const spec = ((await admin.custom.listNamespacedCustomObject(APIS)) as any).items.find((i: any) => i.spec.name === 'patched').spec;
    // Whatever answered 200 is in the stored object; a 409 changed nothing.
    if (a.status === 200) expect(spec.proxy.strip_path).toBe(round % 2 === 0);
    if (b.status === 200) expect(spec.proxy.append_path).toBe(round % 2 === 0);
    if (a.status === 409) expect(a.body.error).toMatch(/changed by someone else|already registered/);
    // Let both informers catch up before the next round.
    await delay(300);
  }
  expect(conflicts).toBeLessThanOrEqual(5);
});

test('a data plane joining or leaving the fleet writes no status: only a CR whose own state changes is written, and each write changes it', async () => {
  const names = Array.from({ length: 12 }, (_, i) => `fleet-${i}`);
  for (const name of names) {
    await admin.objects.create(crFor(name, { proxy: { listen_path: `/${name}/*`, upstreams: { targets: [{ target: upstream.url }] } } }));
  }
  for (const name of names) await waitForCondition(name, 'Programmed', (c) => c.status === 'True', 'True');
  const versions = async () => Object.fromEntries(await Promise.all(names.map(async (n) => [n, (await readCr(n)).metadata.resourceVersion])));
  // Settled: two more leader rounds (it looks again every LEASE_DURATION / 5, at least 1 s) write nothing.
  await delay(2500);
  const before = await versions();
  await delay(2500);
  expect(await versions()).toEqual(before);

  const extra = await startDataPlane({ controlPlaneAddr: cps[1].grpcAddr, id: 'dp-joining' });
  try {
    for (const name of names) await served(extra, `/${name}/x`);
    await delay(2500);
  } finally {
    await extra.stop();
  }
  await delay(2500);
  expect(await versions()).toEqual(before);
  // The controller was awake all along: a changed CR is written (Programmed for its new generation).
  // Every status write it makes changes the status: as many as the watch sees status changes. The apiserver
  // counts the status writes of every ApiDefinition, so the watch covers them all: a CR another test left
  // may still be written meanwhile (the fleet CRs other than names[0] are held unchanged by the versions below).
  const listed = (await admin.custom.listNamespacedCustomObject(APIS)) as any;
  const cr = listed.items.find((i: any) => i.metadata.name === names[0]);
  const lastStatus = new Map<string, unknown>(listed.items.map((i: any) => [i.metadata.name, i.status]));
  const writesBefore = await statusWritesServed(server);
  let statusChanges = 0;
  let ownStatusChanges = 0;
  const watching = await new Watch(admin.config).watch(
    `/apis/gatehouse.dev/v1alpha1/namespaces/${NAMESPACE}/apidefinitions`,
    { resourceVersion: listed.metadata.resourceVersion },
    (type: string, obj: any) => {
      if (type !== 'MODIFIED' || isDeepStrictEqual(obj.status, lastStatus.get(obj.metadata.name))) return;
      statusChanges++;
      if (obj.metadata.name === names[0]) ownStatusChanges++;
      lastStatus.set(obj.metadata.name, obj.status);
    },
    () => undefined,
  );
  try {
    await admin.custom.replaceNamespacedCustomObject({
      ...APIS,
      name: names[0],
      body: { ...cr, spec: { ...cr.spec, proxy: { ...cr.spec.proxy, strip_path: true } } },
    });
    await waitForCondition(names[0], 'Programmed', (c) => c.status === 'True' && c.observedGeneration === 2, 'True for generation 2');
    await delay(2500);
  } finally {
    watching.abort();
  }
  expect(ownStatusChanges).toBeGreaterThan(0);
  expect((await statusWritesServed(server)) - writesBefore).toBe(statusChanges);
  const after = await versions();
  expect(after[names[0]]).not.toBe(before[names[0]]);
  expect({ ...after, [names[0]]: null }).toEqual({ ...before, [names[0]]: null });
});

test('the CP with its restricted token can do its job and nothing else', async () => {
  // Its job (list/watch/create/update CRs, status, leases) is what every other test here relies on. Anything else is refused:
  const refused = async (fn: () => Promise<unknown>) => {
    await expect(fn()).rejects.toMatchObject({ code: 403 });
  };
  // Secrets: read and written in its own namespace only (the CRs' secrets), never deleted (their owner's garbage collection does).
  await expect(identity.objects.list('v1', 'Secret', NAMESPACE)).resolves.toBeDefined();
  await refused(() => identity.objects.list('v1', 'Secret', 'default'));
  await admin.objects.create({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'not-deletable', namespace: NAMESPACE }, data: {} } as KubernetesObject);
  await refused(() =>
    identity.objects.delete({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'not-deletable', namespace: NAMESPACE } } as KubernetesObject),
  );
  await admin.objects.delete({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'not-deletable', namespace: NAMESPACE } } as KubernetesObject);
  await refused(() => identity.objects.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', namespace: NAMESPACE } } as KubernetesObject));
  await refused(() => identity.custom.listNamespacedCustomObject({ ...APIS, namespace: 'default' }));
  await refused(() =>
    identity.objects.create({
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: 'x.example.com' },
    } as KubernetesObject),
  );
  // …while it may read its own CRs.
  await expect(identity.custom.listNamespacedCustomObject(APIS)).resolves.toBeDefined();
});

test('apiserver hung (SIGSTOP, connections open, nothing answered): the leader steps down in time; once it answers again a leader writes status', async () => {
  const holder = await pollUntil(async () => leaseHolder(), { what: 'a lease holder' });
  const leader = cps.find((cp) => cp.name === holder)!;
  // Its latest change of leadership, by identity: lines() keeps the last 300 lines only, so a count of them stays
  // the same when an older one drops out as the new one comes in (how much it logged before is up to other tests).
  const lastLeadershipChange = () => leader.process.lines().findLast((line) => line.json?.msg === 'became leader' || line.json?.msg === 'stopped leading');
  const before = lastLeadershipChange();
  server.pauseApiServer();
  try {
    // LEASE_DURATION 2s: renew deadline 1.3 s, each request aborted after it. Without a timeout the hung renewal never returned.
    await pollUntil(
      async () => {
        const last = lastLeadershipChange();
        return last !== before && last?.json?.msg === 'stopped leading' ? true : undefined;
      },
      { what: `${leader.name} to step down while the apiserver hangs`, timeoutMs: 15_000, details: logs },
    );
  } finally {
    server.resumeApiServer();
  }
  await pollUntil(async () => leaseHolder(), { what: 'a lease holder again', timeoutMs: 30_000, details: logs });
  await admin.objects.create(crFor('after-hang', { proxy: { listen_path: '/after-hang/*', upstreams: { targets: [{ target: upstream.url }] } } }));
  await waitForCondition('after-hang', 'Programmed', (c) => c.status === 'True', 'True, written by a leader after the hang');
});

test('SIGTERM while the apiserver hangs: a running replica still exits 0 within SHUTDOWN_TIMEOUT + 5 s; one still in its first list exits 0 at once', async () => {
  const extra = await startReplica('cp-sigterm', { SHUTDOWN_TIMEOUT: '1s' });
  let starting: ServiceProcess | undefined;
  server.pauseApiServer();
  try {
    const started = performance.now();
    expect(await extra.process.stop(30_000)).toEqual({ code: 0, signal: null });
    expect(performance.now() - started).toBeLessThan(6_000);

    starting = await spawnService({
      name: 'cp-first-list',
      script: CONTROL_PLANE_SCRIPT,
      env: { ...replicaEnv('cp-first-list'), ADMIN_PORT: '0', GRPC_PORT: '0', ADMIN_HOST: '127.0.0.1', GRPC_HOST: '127.0.0.1' },
      listeners: [],
    });
    // Into its first list, which the paused apiserver never answers (a fixed wait was too short on a loaded machine: killed before its handler was in place).
    await pollUntil(async () => starting!.lines().some((line) => line.json?.msg === 'opening kubernetes store') || undefined, {
      what: 'cp-first-list opening its store',
    });
    await delay(500);
    process.kill(starting.pid, 'SIGTERM');
    expect(await starting.exited).toEqual({ code: 0, signal: null });
    expect(starting.lines().some((line) => line.json?.msg === 'stopped before start-up finished')).toBe(true);
  } finally {
    server.resumeApiServer();
    if (starting?.running()) await starting.kill();
    await extra.dispose();
  }
});

test('apiserver restarted: DPs keep serving throughout, CPs recover and accept writes again', async () => {
  await admin.objects.create(crFor('restart-load', { proxy: { listen_path: '/restart-load/*', upstreams: { targets: [{ target: upstream.url }] } } }));
  for (const dp of dps) await served(dp, '/restart-load/x');
  let failures = 0;
  let requests = 0;
  let loading = true;
  const load = (async () => {
    while (loading) {
      for (const dp of dps) {
        requests++;
        const res = await dp.request('GET', '/restart-load/load').catch(() => ({ status: 0 }));
        if (res.status !== 200) failures++;
      }
      await delay(20);
    }
  })();
  let down = false;
  try {
    await server.stopApiServer();
    down = true;
    await delay(3000);
    // The CPs' watches are down: readiness says so, serving does not stop.
    await pollUntil(async () => ((await clients[0].readyz()).status === 503 ? true : undefined), {
      what: 'cp-a /readyz 503 while the apiserver is down',
      timeoutMs: 15_000,
    });
    await server.startApiServer();
    down = false;
    await pollUntil(async () => ((await clients[0].readyz()).status === 200 ? true : undefined), {
      what: 'cp-a ready again',
      timeoutMs: 60_000,
      details: logs,
    });
    const res = await clients[1].createApi(apiDefinition({ name: 'after-restart', listenPath: '/after/*', targets: [upstream.url] }));
    expect(res.status).toBe(201);
    for (const dp of dps) await served(dp, '/after/1');
  } finally {
    // Every other test needs the apiserver, and a load loop left running would keep Jest from exiting.
    loading = false;
    await load;
    if (down) await server.startApiServer();
  }
  expect(requests).toBeGreaterThan(20);
  expect(failures).toBe(0);
});

test('leader killed → the other replica takes the Lease and writes status', async () => {
  await admin.objects.create(crFor('before-failover', { proxy: { listen_path: '/before-failover/*', upstreams: { targets: [{ target: upstream.url }] } } }));
  for (const dp of dps) await served(dp, '/before-failover/x');
  const holder = await pollUntil(async () => leaseHolder(), { what: 'a lease holder' });
  const leader = cps.find((cp) => cp.name === holder)!;
  const follower = cps.find((cp) => cp.name !== holder)!;
  expect(leader).toBeDefined();
  await leader.kill();
  try {
    await pollUntil(async () => ((await leaseHolder()) === follower.name ? true : undefined), {
      what: `${follower.name} holds the lease`,
      timeoutMs: 20_000,
      details: logs,
    });
    await admin.objects.create(crFor('after-failover', { proxy: { listen_path: '/failover/*', upstreams: { targets: [{ target: upstream.url }] } } }));
    await waitForCondition('after-failover', 'Accepted', (c) => c.status === 'True', 'True, written by the new leader');
    // The killed leader's DP lost its CP: it keeps serving what it had.
    const orphan = dps[cps.indexOf(leader)];
    expect((await orphan.request('GET', '/before-failover/still')).status).toBe(200);
  } finally {
    // Every other test needs both replicas (its admin client, its DP).
    await leader.restart();
  }
});
