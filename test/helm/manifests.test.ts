/**
 * The plain manifests (deploy/manifests/gatehouse.yaml) for people who do not use Helm: the committed
 * file is what `npm run generate:manifests` renders now, rendering is reproducible, the manifests
 * reference only the Secrets the commands of docs/kubernetes.md create (with the keys they read), and the
 * certificates of deploy/grpc-tls-secrets.sh really carry a mutual-TLS sync between a CP and a DP
 * dialled by the name the manifests give.
 */
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { KubernetesObject } from '@kubernetes/client-node';
import { decodeSecretValue, deploymentOf, envValue, ofKind, onlyContainer, podSpecOf, referencedConfig } from '../helpers/chart-objects.js';
import { createAdminClient } from '../helpers/admin-client.js';
import { apiDefinition } from '../helpers/api-definition.js';
import { HELM_BIN, parseObjects, requireHelm, tlsSecretsFromScript } from '../helpers/helm.js';
import { REPO_ROOT } from '../helpers/service-process.js';
import { startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';
import { startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

const run = promisify(execFile);
const T = 60_000;
const MANIFESTS = 'deploy/manifests/gatehouse.yaml';

async function generate(): Promise<string> {
  requireHelm();
  const { stdout } = await run(process.execPath, ['scripts/generate-manifests.mjs', '--stdout'], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', HELM: HELM_BIN },
    maxBuffer: 16 * 1024 * 1024,
  });
  return stdout;
}

let manifests: KubernetesObject[];

beforeAll(async () => {
  manifests = parseObjects(await readFile(join(REPO_ROOT, MANIFESTS), 'utf8'));
}, T);

test(
  'the committed manifests are what `npm run generate:manifests` renders now (run it after changing the chart)',
  async () => {
    const committed = await readFile(join(REPO_ROOT, MANIFESTS), 'utf8');
    expect(await generate()).toBe(committed);
  },
  T,
);

test(
  'reproducible: two renders are byte-identical, and no Secret (so nothing random) is rendered',
  async () => {
    const [a, b] = await Promise.all([generate(), generate()]);
    expect(a).toBe(b);
    expect(ofKind(manifests, 'Secret')).toEqual([]);
    expect(a).not.toMatch(/helm\.sh\/chart|managed-by: Helm/);
    expect(manifests.map((o) => o.metadata?.namespace)).toEqual(manifests.map(() => 'gatehouse'));
  },
  T,
);

test(
  'the manifests read exactly the Secrets and keys the commands of docs/kubernetes.md create',
  async () => {
    const needed = new Map<string, Set<string>>();
    for (const d of ofKind(manifests, 'Deployment')) {
      for (const ref of referencedConfig(podSpecOf(d)).secrets) {
        const keys = needed.get(ref.name) ?? new Set<string>();
        // A whole-Secret volume: the keys are the files GRPC_TLS_* name in it.
        const fileKeys =
          ref.keys.length > 0
            ? ref.keys
            : onlyContainer(d)
                .env!.filter((e) => e.name.startsWith('GRPC_TLS_'))
                .map((e) => e.value!.split('/').pop()!);
        for (const key of fileKeys) keys.add(key);
        needed.set(ref.name, keys);
      }
    }
    const doc = await readFile(join(REPO_ROOT, 'docs', 'kubernetes.md'), 'utf8');
    const adminCommand = doc.split('\n').find((line) => line.includes('create secret generic gatehouse-admin'));
    expect(adminCommand).toBeDefined();
    const adminKeys = [...adminCommand!.matchAll(/--from-literal=([\w.-]+)=/g)].map((m) => m[1]).sort();
    expect(doc).toContain('bash deploy/grpc-tls-secrets.sh gatehouse | kubectl apply -f -');

    const hashKeyCommand = doc.split('\n').find((line) => line.includes('create secret generic gatehouse-key-auth-hash-key'));
    expect(hashKeyCommand).toBeDefined();
    const hashKeyKeys = [...hashKeyCommand!.matchAll(/--from-literal=([\w.-]+)=/g)].map((m) => m[1]).sort();

    const provided = new Map<string, string[]>([
      ['gatehouse-admin', adminKeys],
      ['gatehouse-key-auth-hash-key', hashKeyKeys],
    ]);
    for (const secret of await tlsSecretsFromScript()) provided.set(secret.metadata!.name!, Object.keys((secret as any).data).sort());
    expect(Object.fromEntries([...needed].map(([name, keys]) => [name, [...keys].sort()]))).toEqual(Object.fromEntries(provided));
  },
  T,
);

describe('deploy/grpc-tls-secrets.sh certificates carry a real mutual-TLS sync', () => {
  let dir: string;
  let cp: ControlPlane | undefined;
  let dp: DataPlane | undefined;
  let upstream: Upstream | undefined;

  afterAll(async () => {
    if (dp) await dp.stop();
    await cp?.dispose();
    await upstream?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  }, T);

  test(
    'CP and DP with the script’s Secrets; the DP verifies the CP as the manifests’ CONTROL_PLANE_ADDR host',
    async () => {
      dir = await mkdtemp(join(tmpdir(), 'gatehouse-manifest-tls-'));
      const files: Record<string, Record<string, string>> = {};
      for (const secret of await tlsSecretsFromScript()) {
        if ((secret as { type?: string }).type !== 'kubernetes.io/tls') continue; // the join token
        const name = secret.metadata!.name!;
        files[name] = {};
        for (const key of ['ca.crt', 'tls.crt', 'tls.key']) {
          const path = join(dir, `${name}-${key}`);
          await writeFile(path, decodeSecretValue(secret as any, key), { mode: 0o600 });
          files[name][key] = path;
        }
      }
      const cpFiles = files['gatehouse-control-plane-tls'];
      const dpFiles = files['gatehouse-data-plane-tls'];
      const addr = envValue(onlyContainer(deploymentOf(manifests, 'data-plane')), 'CONTROL_PLANE_ADDR')!;
      const host = addr.slice(0, addr.lastIndexOf(':'));
      const cpCert = new X509Certificate(await readFile(cpFiles['tls.crt']));
      expect(cpCert.checkHost(host)).toBe(host);
      expect(cpCert.checkIssued(new X509Certificate(await readFile(cpFiles['ca.crt'])))).toBe(true);
      expect(await readFile(dpFiles['ca.crt'], 'utf8')).toBe(await readFile(cpFiles['ca.crt'], 'utf8'));

      upstream = await startUpstream('manifest-tls');
      cp = await startControlPlane({
        env: { GRPC_TLS_CERT: cpFiles['tls.crt'], GRPC_TLS_KEY: cpFiles['tls.key'], GRPC_TLS_CA: cpFiles['ca.crt'] },
      });
      const admin = await createAdminClient(cp);
      dp = await startDataPlane({
        controlPlaneAddr: cp.grpcAddr,
        env: { GRPC_TLS_CERT: dpFiles['tls.crt'], GRPC_TLS_KEY: dpFiles['tls.key'], GRPC_TLS_CA: dpFiles['ca.crt'], GRPC_TLS_SERVER_NAME: host },
      });
      const created = await admin.createApi(apiDefinition({ name: 'manifest-tls', listenPath: '/m/*', targets: [upstream.url] }));
      await admin.waitForDataPlanes(created, [dp]);
      expect((await dp.request('GET', '/m/x')).status).toBe(200);
    },
    T,
  );
});
