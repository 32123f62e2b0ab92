/**
 * The Helm chart against a real kube-apiserver + etcd (scripts/test-tools.sh), one per file:
 * server-side dry-run of every object several value sets render (and of the plain manifests with
 * the Secrets their docs/kubernetes.md commands create), then a real `helm install` (all objects created),
 * `helm upgrade` keeping the generated secrets (admin password, token secret, CA and certificates) and
 * `helm uninstall` removing the release's objects but the key_auth installation key. The default values
 * running on a node (pods Ready, CRDs and CRs kept on uninstall) are test/cluster/helm-install.test.ts.
 */
import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { KubernetesObject } from '@kubernetes/client-node';
import { decodeSecretValue, ofKind, type AnyObject } from '../helpers/chart-objects.js';
import { kubeClients, type KubeClients } from '../helpers/gatehouse-on-kubernetes.js';
import { CHART_DIR, helmOk, parseObjects, renderChart, runHelm, tlsSecretsFromScript } from '../helpers/helm.js';
import { startKubeApiServer, type KubeApiServer } from '../helpers/kube-apiserver.js';
import { pollUntil } from '../helpers/poll-until.js';
import { REPO_ROOT } from '../helpers/service-process.js';

const T = 120_000;
const RELEASE = 'gh';
const NS = 'gatehouse';

let server: KubeApiServer;
let admin: KubeClients;

async function createNamespace(name: string): Promise<void> {
  await admin.objects.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
}

/** Reads an object back; undefined on 404. */
async function read(object: KubernetesObject): Promise<AnyObject | undefined> {
  try {
    return (await admin.objects.read({
      apiVersion: object.apiVersion,
      kind: object.kind,
      metadata: { name: object.metadata!.name!, namespace: object.metadata?.namespace },
    })) as AnyObject;
  } catch (err) {
    if ((err as { code?: number }).code === 404) return undefined;
    throw err;
  }
}

/** Server-side dry-run create of each object; returns "Kind/name: reason" for every refusal. */
async function dryRunAll(objects: readonly KubernetesObject[]): Promise<string[]> {
  const refusals: string[] = [];
  for (const object of objects) {
    try {
      await admin.objects.create(object, undefined, 'All');
    } catch (err) {
      const e = err as { code?: number; body?: unknown; message?: string };
      refusals.push(`${object.kind}/${object.metadata?.name}: ${e.code ?? ''} ${typeof e.body === 'string' ? e.body : JSON.stringify(e.body ?? e.message)}`);
    }
  }
  return refusals;
}

const helmArgs = (): string[] => ['--kubeconfig', admin.kubeconfig, '--namespace', NS];

beforeAll(async () => {
  server = await startKubeApiServer();
  admin = await kubeClients(await server.writeKubeconfig(server.adminToken));
}, T);

afterAll(async () => {
  await server?.stop();
}, T);

describe('server-side dry-run (dryRun=All) of every rendered object', () => {
  // The default values, and autoscaling off, are installed and upgraded for real on the test node (test/cluster/).
  const sets: Record<string, Record<string, unknown>> = {
    existingSecrets: {
      admin: { existingSecret: 'my-admin' },
      grpcTls: { source: 'existingSecret', existingSecret: { controlPlane: 'my-cp-tls', dataPlane: 'my-dp-tls' } },
      dataPlane: { redis: { existingSecret: 'my-redis' } },
    },
    loadBalancer: {
      dataPlane: { service: { type: 'LoadBalancer', externalTrafficPolicy: 'Local', nodePort: 31080, loadBalancerSourceRanges: ['10.0.0.0/8'] } },
    },
    tlsOff: { grpcTls: { enabled: false } },
  };

  beforeAll(async () => {
    await createNamespace('dry-run');
  }, T);

  test.each(Object.keys(sets))(
    '%s: the apiserver accepts every object',
    async (set) => {
      const objects = await renderChart({ namespace: 'dry-run', values: sets[set] });
      expect(objects.length).toBeGreaterThanOrEqual(10);
      expect(await dryRunAll(objects)).toEqual([]);
      // Dry run persisted nothing.
      expect(await read(objects.find((o) => o.kind === 'Deployment')!)).toBeUndefined();
    },
    T,
  );

  test(
    'a broken object is refused (the dry run does validate)',
    async () => {
      const objects = await renderChart({ namespace: 'dry-run' });
      const deployment = structuredClone(objects.find((o) => o.kind === 'Deployment')) as AnyObject;
      deployment.spec.template.spec.containers[0].ports[0].containerPort = 70000;
      const refusals = await dryRunAll([deployment]);
      expect(refusals).toHaveLength(1);
      expect(refusals[0]).toContain('containerPort');
    },
    T,
  );

  test(
    'plain manifests + the Secrets of the docs/kubernetes.md commands',
    async () => {
      await createNamespace('gatehouse-plain');
      const manifests = parseObjects(
        (await readFile(join(REPO_ROOT, 'deploy/manifests/gatehouse.yaml'), 'utf8')).replaceAll('namespace: gatehouse\n', 'namespace: gatehouse-plain\n'),
      );
      const secrets = await tlsSecretsFromScript('gatehouse-plain');
      const adminSecret = {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'gatehouse-admin', namespace: 'gatehouse-plain' },
        stringData: { password: 'p', 'jwt-secret': 's' },
      };
      expect(manifests.every((o) => o.metadata?.namespace === 'gatehouse-plain')).toBe(true);
      expect(await dryRunAll([...secrets, adminSecret, ...manifests])).toEqual([]);
    },
    T,
  );
});

// One test whose steps run in order: each step works on what the one before left (the release and
// the secrets it generated), and separate tests would each need a helm install of their own.
describe('helm install → upgrade → uninstall', () => {
  /** The data of the generated Secrets, decoded. */
  async function secretData(): Promise<Record<string, Record<string, string>>> {
    const out: Record<string, Record<string, string>> = {};
    for (const name of [
      `${RELEASE}-gatehouse-admin`,
      `${RELEASE}-gatehouse-join-token`,
      `${RELEASE}-gatehouse-key-auth-hash-key`,
      `${RELEASE}-gatehouse-grpc-ca`,
      `${RELEASE}-gatehouse-control-plane-tls`,
      `${RELEASE}-gatehouse-data-plane-tls`,
    ]) {
      const secret = await read({ apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: NS } });
      if (!secret) throw new Error(`Secret ${name} does not exist`);
      out[name] = Object.fromEntries(Object.keys(secret.data).map((k) => [k, decodeSecretValue(secret, k)]));
    }
    return out;
  }

  beforeAll(async () => {
    await createNamespace(NS);
  }, T);

  test(
    'install creates every object; upgrades keep the generated secrets and reissue a lost certificate; uninstall removes all but the key_auth key',
    async () => {
      // Step 1: helm install creates every object.
      const result = await runHelm(['install', RELEASE, CHART_DIR, ...helmArgs()]);
      expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: '' });
      // NOTES tell how to get the password from the Secret that exists.
      expect(result.stdout).toContain(`get secret ${RELEASE}-gatehouse-admin -o jsonpath='{.data.password}' | base64 -d`);
      expect(result.stdout).toContain(`port-forward svc/${RELEASE}-gatehouse-control-plane 8081:8081`);

      const installed = parseObjects(await helmOk(['get', 'manifest', RELEASE, ...helmArgs()]));
      const kinds = new Set(installed.map((o) => o.kind));
      for (const kind of ['Deployment', 'Service', 'Secret', 'ServiceAccount', 'Role', 'RoleBinding', 'HorizontalPodAutoscaler', 'PodDisruptionBudget']) {
        expect(kinds).toContain(kind);
      }
      for (const object of installed) {
        const live = await read(object);
        expect({ object: `${object.kind}/${object.metadata!.name}`, exists: live !== undefined }).toEqual({
          object: `${object.kind}/${object.metadata!.name}`,
          exists: true,
        });
        expect(live?.metadata?.annotations?.['meta.helm.sh/release-name']).toBe(RELEASE);
      }
      const generated = await secretData();
      // What was generated is usable: a password, a long token secret, a CA that signed both certificates.
      expect(generated[`${RELEASE}-gatehouse-admin`].password).toMatch(/^[A-Za-z0-9]{32}$/);
      expect(generated[`${RELEASE}-gatehouse-admin`]['jwt-secret'].length).toBeGreaterThanOrEqual(32);
      const ca = new X509Certificate(generated[`${RELEASE}-gatehouse-grpc-ca`]['tls.crt']);
      for (const side of ['control-plane', 'data-plane']) {
        const data = generated[`${RELEASE}-gatehouse-${side}-tls`];
        expect(data['ca.crt']).toBe(ca.toString());
        expect(new X509Certificate(data['tls.crt']).verify(ca.publicKey)).toBe(true);
      }

      // Step 2: helm upgrade applies new values and keeps the generated admin password, token secret, CA and certificates.
      await helmOk([
        'upgrade',
        RELEASE,
        CHART_DIR,
        ...helmArgs(),
        '--reuse-values',
        '--set',
        'dataPlane.autoscaling.maxReplicas=12,controlPlane.logLevel=debug',
      ]);
      const hpa = await read(installed.find((o) => o.kind === 'HorizontalPodAutoscaler')!);
      expect(hpa!.spec.maxReplicas).toBe(12);
      expect(await secretData()).toEqual(generated);
      // Back to the chart's defaults (--reset-values): still the same secrets.
      await helmOk(['upgrade', RELEASE, CHART_DIR, ...helmArgs(), '--reset-values']);
      expect(await secretData()).toEqual(generated);
      expect((await read(installed.find((o) => o.kind === 'HorizontalPodAutoscaler')!))!.spec.maxReplicas).toBe(10);

      // Step 3: a lost certificate Secret is issued again by the kept CA on upgrade; the other side keeps its own.
      const dpTls = `${RELEASE}-gatehouse-data-plane-tls`;
      await admin.objects.delete({ apiVersion: 'v1', kind: 'Secret', metadata: { name: dpTls, namespace: NS } });
      await helmOk(['upgrade', RELEASE, CHART_DIR, ...helmArgs()]);
      const now = await secretData();
      expect(now[dpTls]['tls.crt']).not.toBe(generated[dpTls]['tls.crt']);
      expect(now[dpTls]['ca.crt']).toBe(generated[dpTls]['ca.crt']);
      expect(new X509Certificate(now[dpTls]['tls.crt']).verify(ca.publicKey)).toBe(true);
      const { [dpTls]: _renewed, ...rest } = now;
      const { [dpTls]: _old, ...restBefore } = generated;
      expect(rest).toEqual(restBefore);

      // Step 4: helm uninstall removes the release’s objects (that CRDs and custom resources stay is checked on the test node).
      await helmOk(['uninstall', RELEASE, ...helmArgs()]);
      // The key_auth installation key outlives the release, as the custom resources whose hashes it keys do.
      const hashKey = `${RELEASE}-gatehouse-key-auth-hash-key`;
      for (const object of installed.filter((o) => o.metadata!.name !== hashKey)) {
        await pollUntil(async () => ((await read(object)) === undefined ? true : undefined), {
          what: `${object.kind}/${object.metadata!.name} deleted`,
          timeoutMs: 20_000,
          intervalMs: 200,
        });
      }
      expect(ofKind(installed, 'Secret').length).toBeGreaterThanOrEqual(4);
      const keptKey = await read({ apiVersion: 'v1', kind: 'Secret', metadata: { name: hashKey, namespace: NS } });
      expect(keptKey && decodeSecretValue(keptKey, 'key-auth-hash-key')).toBe(generated[hashKey]['key-auth-hash-key']);
      expect((await helmOk(['list', '--short', ...helmArgs()])).trim()).toBe('');
    },
    4 * T,
  ); // the budget of the four tests the steps were
});
