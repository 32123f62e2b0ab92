/**
 * The Helm chart (helm/gatehouse) rendered by the real helm binary: `helm lint --strict`, then
 * `helm template` with several value sets, asserting on the parsed objects what the cluster would
 * do with them: the mTLS wiring (mounted Secrets, GRPC_TLS_* at mounted files, a CP certificate
 * naming the address the DPs dial), references that resolve, probes on the real paths and ports,
 * selectors that match, nobody running as root, the Role = deploy/rbac/role.yaml, and the schema
 * refusing wrong values with a message naming the value.
 */
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { loadAllYaml, loadYaml, type KubernetesObject, type V1Container } from '@kubernetes/client-node';
import {
  containerPort,
  decodeSecretValue,
  deploymentOf,
  envValue,
  envVar,
  ofKind,
  one,
  onlyContainer,
  podSpecOf,
  providedSecrets,
  referencedConfig,
  selectedDeployments,
  servicePortTarget,
  type AnyObject,
} from '../helpers/chart-objects.js';
import { CHART_DIR, renderChart, renderChartError, runHelm, valuesFile } from '../helpers/helm.js';
import { REPO_ROOT } from '../helpers/service-process.js';

const T = 60_000;
const NS = 'gatehouse';

/** Value sets the chart must render (and lint) cleanly. */
const VALUE_SETS: Record<string, Record<string, unknown>> = {
  defaults: {},
  existingSecrets: {
    admin: { existingSecret: 'my-admin', passwordKey: 'pw', jwtSecretKey: 'signing' },
    grpcTls: { source: 'existingSecret', existingSecret: { controlPlane: 'my-cp-tls', dataPlane: 'my-dp-tls' } },
    grpcJoinToken: { enabled: true, existingSecret: 'my-join-token', key: 'token' },
    keyAuthHashKey: { existingSecret: 'my-key-auth-hash-key', key: 'hash-key' },
    dataPlane: { redis: { existingSecret: 'my-redis', key: 'url' } },
  },
  certManager: { grpcTls: { source: 'certManager' } },
  certManagerIssuer: { grpcTls: { source: 'certManager', certManager: { issuerRef: { name: 'corp-ca', kind: 'ClusterIssuer' } } } },
  autoscalingOff: { dataPlane: { replicas: 5, autoscaling: { enabled: false } } },
  loadBalancer: {
    dataPlane: { service: { type: 'LoadBalancer', port: 443, externalTrafficPolicy: 'Local', loadBalancerSourceRanges: ['10.0.0.0/8'], nodePort: 30443 } },
  },
  tlsOff: { grpcTls: { enabled: false } },
  joinTokenOff: { grpcJoinToken: { enabled: false } },
  serviceMonitor: { metrics: { serviceMonitor: { enabled: true, labels: { release: 'prom' } } } },
  proxyTls: { dataPlane: { tls: { existingSecret: 'edge-tls' }, service: { port: 443 } } },
  httpsRedirect: { dataPlane: { tls: { existingSecret: 'edge-tls', redirectHttp: true }, service: { port: 443 } } },
  redirectWithoutTls: { dataPlane: { tls: { redirectHttp: true } } },
  http2Off: { dataPlane: { tls: { existingSecret: 'edge-tls', http2: false } } },
  h2cOff: { dataPlane: { h2c: false } },
  proxyMtls: { dataPlane: { tls: { existingSecret: 'edge-tls', clientCaSecret: 'partner-ca', minVersion: 'TLSv1.3' } } },
  clientCaWithoutTls: { dataPlane: { tls: { clientCaSecret: 'partner-ca' } } },
  upstreamTls: { dataPlane: { upstreamTls: { caSecret: 'internal-ca', clientSecret: 'gateway-client' } } },
  tracing: { tracing: { endpoint: 'http://otel-collector.observability:4317', protocol: 'grpc', sampler: 'parentbased_traceidratio', samplerArg: '0.1' } },
};

const rendered = new Map<string, KubernetesObject[]>();
async function render(set: keyof typeof VALUE_SETS): Promise<KubernetesObject[]> {
  let objects = rendered.get(set);
  if (!objects) {
    objects = await renderChart({ values: VALUE_SETS[set] });
    rendered.set(set, objects);
  }
  return objects;
}

const cp = (objects: KubernetesObject[]) => deploymentOf(objects, 'control-plane');
const dp = (objects: KubernetesObject[]) => deploymentOf(objects, 'data-plane');

/** Where a container's env var points when it names a file: the mount holding it, and the key. */
function mountedFile(deployment: AnyObject, container: V1Container, path: string) {
  const mount = (container.volumeMounts ?? []).find((m) => path === m.mountPath || path.startsWith(`${m.mountPath}/`));
  if (!mount) throw new Error(`${path} is on no volume mount of ${container.name}`);
  const volume = podSpecOf(deployment).volumes?.find((v) => v.name === mount.name);
  if (!volume) throw new Error(`volume ${mount.name} of ${container.name} is not declared`);
  const file = path.slice(mount.mountPath.length + 1);
  const key = volume.secret?.items?.find((i) => i.path === file)?.key ?? file;
  return { mount, volume, key, secretName: volume.secret?.secretName };
}

/** GRPC_TLS_* of a container → the PEM texts of the mounted Secret (generate mode). */
function tlsMaterial(objects: KubernetesObject[], deployment: AnyObject) {
  const container = onlyContainer(deployment);
  const out: Record<string, string> = {};
  for (const name of ['GRPC_TLS_CERT', 'GRPC_TLS_KEY', 'GRPC_TLS_CA']) {
    const path = envValue(container, name);
    expect(path).toMatch(/^\//);
    const { volume, key, secretName, mount } = mountedFile(deployment, container, path!);
    expect(mount.readOnly).toBe(true);
    expect(volume.secret).toBeDefined();
    out[name] = decodeSecretValue(one(objects, 'Secret', secretName), key);
  }
  return out;
}

beforeAll(async () => {
  await Promise.all(Object.keys(VALUE_SETS).map((set) => render(set)));
}, T);

describe('helm lint --strict', () => {
  test.each(Object.keys(VALUE_SETS))(
    '%s',
    async (set) => {
      const file = await valuesFile(VALUE_SETS[set]);
      try {
        const result = await runHelm(['lint', '--strict', CHART_DIR, '--namespace', NS, ...file.args]);
        expect(`${result.stdout}${result.stderr}`).toContain('0 chart(s) failed');
        expect(result.code).toBe(0);
      } finally {
        await file.dispose();
      }
    },
    T,
  );
});

describe('defaults', () => {
  test(
    'the Role renders exactly the rules of deploy/rbac/role.yaml, bound to the control plane’s ServiceAccount',
    async () => {
      const objects = await render('defaults');
      const expected = loadYaml<AnyObject>(await readFile(join(REPO_ROOT, 'deploy/rbac/role.yaml'), 'utf8'));
      const role = one(objects, 'Role');
      expect(role.rules).toEqual(expected.rules);
      const binding = one(objects, 'RoleBinding');
      expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role.metadata!.name });
      const sa = podSpecOf(cp(objects)).serviceAccountName;
      expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: sa, namespace: NS }]);
      expect(one(objects, 'ServiceAccount', sa).automountServiceAccountToken).not.toBe(false);
      // The data planes get no Kubernetes API token at all.
      const dpSpec = podSpecOf(dp(objects));
      expect(dpSpec.serviceAccountName).not.toBe(sa);
      expect(dpSpec.automountServiceAccountToken).toBe(false);
    },
    T,
  );

  test(
    'controlPlane.discovery.namespaces: DISCOVERY_NAMESPACES, and in each namespace a Role reading only Services and EndpointSlices, bound to the CP',
    async () => {
      expect(onlyContainer(cp(await render('defaults'))).env!.map((e) => e.name)).not.toContain('DISCOVERY_NAMESPACES');
      const objects = await renderChart({ values: { controlPlane: { discovery: { namespaces: ['shop', 'billing'] } } } });
      expect(onlyContainer(cp(objects)).env).toContainEqual({ name: 'DISCOVERY_NAMESPACES', value: 'shop,billing' });
      const sa = podSpecOf(cp(objects)).serviceAccountName;
      for (const namespace of ['shop', 'billing']) {
        const role = ofKind(objects, 'Role').find((r) => r.metadata?.namespace === namespace)!;
        expect(role.rules).toEqual([
          { apiGroups: [''], resources: ['services'], verbs: ['list', 'watch'] },
          { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch'] },
        ]);
        const binding = ofKind(objects, 'RoleBinding').find((b) => b.metadata?.namespace === namespace)!;
        expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role.metadata!.name });
        expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: sa, namespace: NS }]);
      }
    },
    T,
  );

  test(
    "controlPlane.gatewayApi.enabled: GATEWAY_API, GATEWAY_CONTROLLER_NAME, GATEWAY_ADDRESS_SERVICE (the data planes' Service), and exactly the rules of deploy/rbac/gateway-api-role.yaml bound to the CP; nothing when off",
    async () => {
      const defaults = await render('defaults');
      expect(onlyContainer(cp(defaults)).env!.map((e) => e.name)).not.toContain('GATEWAY_API');
      expect(ofKind(defaults, 'ClusterRole')).toEqual([]);
      const objects = await renderChart({ values: { controlPlane: { gatewayApi: { enabled: true, controllerName: 'example.com/gw' } } } });
      const c = onlyContainer(cp(objects));
      expect(envValue(c, 'GATEWAY_API')).toBe('true');
      expect(envValue(c, 'GATEWAY_CONTROLLER_NAME')).toBe('example.com/gw');
      const expected = loadAllYaml(await readFile(join(REPO_ROOT, 'deploy/rbac/gateway-api-role.yaml'), 'utf8')) as AnyObject[];
      const sa = podSpecOf(cp(objects)).serviceAccountName;
      expect(envValue(c, 'GATEWAY_ADDRESS_SERVICE')).toBe(dp(objects).metadata!.name);
      expect(expected.map((e) => e.kind)).toEqual(['ClusterRole']);
      for (const [kind, bindingKind] of [['ClusterRole', 'ClusterRoleBinding']] as const) {
        const role = ofKind(objects, kind).find((r) => String(r.metadata?.name).includes('gateway'))!;
        expect(role.rules).toEqual(expected.find((e) => e.kind === kind)!.rules);
        const binding = ofKind(objects, bindingKind).find((b) => b.roleRef?.name === role.metadata!.name)!;
        expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind, name: role.metadata!.name });
        expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: sa, namespace: NS }]);
      }
    },
    T,
  );

  test(
    "controlPlane.gatewayApi.enabled: the data planes listen for Gateway HTTPS listeners (GATEWAY_HTTPS_PORT) and their Service's port 443 reaches it; nothing when off; the two Service ports must differ",
    async () => {
      const gatewayPorts = (objects: KubernetesObject[]) => {
        const c = onlyContainer(dp(objects));
        const service = ofKind(objects, 'Service').find((s) => s.metadata!.name!.endsWith('data-plane'))!;
        return {
          env: envValue(c, 'GATEWAY_HTTPS_PORT'),
          container: c.ports?.filter((p) => p.name === 'gateway-https'),
          service: (service.spec.ports as Array<{ name: string }>).filter((p) => p.name === 'gateway-https'),
        };
      };
      expect(gatewayPorts(await render('defaults'))).toEqual({ env: undefined, container: [], service: [] });
      const objects = await renderChart({ values: { controlPlane: { gatewayApi: { enabled: true } } } });
      expect(gatewayPorts(objects)).toEqual({
        env: '8443',
        container: [{ name: 'gateway-https', containerPort: 8443, protocol: 'TCP' }],
        service: [{ name: 'gateway-https', port: 443, targetPort: 'gateway-https', protocol: 'TCP' }],
      });
      expect(await renderChartError({ controlPlane: { gatewayApi: { enabled: true } }, dataPlane: { service: { port: 443 } } })).toMatch(
        /dataPlane.service.port and dataPlane.service.gatewayHttpsPort must differ/,
      );
    },
    T,
  );

  test(
    'control plane: 2 replicas, STORE=kubernetes, leader election, identity and namespace from the Downward API',
    async () => {
      const objects = await render('defaults');
      const deployment = cp(objects);
      expect(deployment.spec!.replicas).toBe(2);
      const c = onlyContainer(deployment);
      expect(c.args).toEqual(['node', '--max-semi-space-size=8', 'control-plane/bundle/main.js']);
      expect(envValue(c, 'STORE')).toBe('kubernetes');
      expect(envValue(c, 'LEADER_ELECTION')).toBe('true');
      expect(envVar(c, 'POD_NAME').valueFrom).toEqual({ fieldRef: { fieldPath: 'metadata.name' } });
      expect(envVar(c, 'GATEHOUSE_NAMESPACE').valueFrom).toEqual({ fieldRef: { fieldPath: 'metadata.namespace' } });
      expect(envValue(c, 'LEASE_NAME')).toBe('gh-gatehouse-control-plane');
      expect(envValue(c, 'LEASE_DURATION')).toBe('15s');
      // The admin credentials come from the generated Secret, which holds both keys.
      const password = envVar(c, 'ADMIN_PASSWORD').valueFrom!.secretKeyRef!;
      const jwt = envVar(c, 'ADMIN_JWT_SECRET').valueFrom!.secretKeyRef!;
      expect(password.name).toBe(jwt.name);
      const secret = one(objects, 'Secret', password.name);
      expect(decodeSecretValue(secret, password.key).length).toBeGreaterThanOrEqual(32);
      expect(decodeSecretValue(secret, jwt.key).length).toBeGreaterThanOrEqual(32);
    },
    T,
  );

  test(
    'a join token by default: both sides read GRPC_JOIN_TOKEN from one generated Secret; a fresh render makes a new one',
    async () => {
      const objects = await render('defaults');
      const cpRef = envVar(onlyContainer(cp(objects)), 'GRPC_JOIN_TOKEN').valueFrom!.secretKeyRef!;
      expect(envVar(onlyContainer(dp(objects)), 'GRPC_JOIN_TOKEN').valueFrom!.secretKeyRef).toEqual(cpRef);
      expect(cpRef).toEqual({ name: 'gh-gatehouse-join-token', key: 'join-token' });
      const token = decodeSecretValue(one(objects, 'Secret', cpRef.name), cpRef.key);
      expect(token.length).toBeGreaterThanOrEqual(32);
      expect(decodeSecretValue(one(await renderChart(), 'Secret', cpRef.name), cpRef.key)).not.toBe(token);
    },
    T,
  );

  test(
    'the key_auth installation key: the CP reads KEY_AUTH_HASH_KEY from a generated Secret kept on uninstall; the DP never sees it',
    async () => {
      const objects = await render('defaults');
      const ref = envVar(onlyContainer(cp(objects)), 'KEY_AUTH_HASH_KEY').valueFrom!.secretKeyRef!;
      expect(ref).toEqual({ name: 'gh-gatehouse-key-auth-hash-key', key: 'key-auth-hash-key' });
      const secret = one(objects, 'Secret', ref.name);
      expect(secret.metadata!.annotations).toEqual({ 'helm.sh/resource-policy': 'keep' });
      expect(decodeSecretValue(secret, ref.key)).toMatch(/^[A-Za-z0-9]{48}$/);
      expect(onlyContainer(dp(objects)).env!.map((e) => e.name)).not.toContain('KEY_AUTH_HASH_KEY');
    },
    T,
  );

  test(
    'grpcJoinToken.enabled=false: no join-token Secret and no GRPC_JOIN_TOKEN on either side',
    async () => {
      const objects = await render('joinTokenOff');
      expect(ofKind(objects, 'Secret').map((s) => s.metadata!.name)).not.toContain('gh-gatehouse-join-token');
      for (const d of ofKind(objects, 'Deployment')) expect(onlyContainer(d).env!.map((e) => e.name)).not.toContain('GRPC_JOIN_TOKEN');
    },
    T,
  );

  test(
    'a fresh render generates a new random admin password (there is no default password)',
    async () => {
      const again = await renderChart();
      const ref = envVar(onlyContainer(cp(again)), 'ADMIN_PASSWORD').valueFrom!.secretKeyRef!;
      const first = decodeSecretValue(one(await render('defaults'), 'Secret', ref.name), ref.key);
      expect(decodeSecretValue(one(again, 'Secret', ref.name), ref.key)).not.toBe(first);
    },
    T,
  );

  test(
    'mutual TLS: both sides mount their Secret, GRPC_TLS_* name mounted files, the chain and the names verify',
    async () => {
      const objects = await render('defaults');
      const cpTls = tlsMaterial(objects, cp(objects));
      const dpTls = tlsMaterial(objects, dp(objects));
      expect(cpTls.GRPC_TLS_CA).toBe(dpTls.GRPC_TLS_CA);
      const ca = new X509Certificate(cpTls.GRPC_TLS_CA);
      expect(ca.ca).toBe(true);
      const cpCert = new X509Certificate(cpTls.GRPC_TLS_CERT);
      const dpCert = new X509Certificate(dpTls.GRPC_TLS_CERT);
      for (const cert of [cpCert, dpCert]) {
        expect(cert.checkIssued(ca)).toBe(true);
        expect(cert.verify(ca.publicKey)).toBe(true);
        expect(cert.ca).toBe(false);
      }
      expect(cpCert.fingerprint256).not.toBe(dpCert.fingerprint256);
      // Each key is the private half of its certificate.
      expect(cpCert.checkPrivateKey(createPrivateKey(cpTls.GRPC_TLS_KEY))).toBe(true);
      expect(dpCert.checkPrivateKey(createPrivateKey(dpTls.GRPC_TLS_KEY))).toBe(true);
      // The DP dials a name the CP certificate holds; the CP's cert names every form of its Service.
      const addr = envValue(onlyContainer(dp(objects)), 'CONTROL_PLANE_ADDR')!;
      const host = addr.slice(0, addr.lastIndexOf(':'));
      expect(host).toBe('gh-gatehouse-control-plane.gatehouse.svc.cluster.local');
      expect(cpCert.checkHost(host)).toBe(host);
      const service = one(objects, 'Service', host.split('.')[0]);
      const serviceName = service.metadata!.name!;
      for (const name of [serviceName, `${serviceName}.${NS}`, `${serviceName}.${NS}.svc`]) {
        expect(cpCert.checkHost(name)).toBe(name);
      }
      expect(dpCert.checkHost(host)).toBeUndefined();
      // The CA key is in no pod.
      const caSecret = one(objects, 'Secret', 'gh-gatehouse-grpc-ca');
      for (const d of [cp(objects), dp(objects)]) {
        expect(referencedConfig(podSpecOf(d)).secrets.map((s) => s.name)).not.toContain(caSecret.metadata!.name);
      }
    },
    T,
  );

  test(
    'the DP reaches the CP’s gRPC port through the CP Service; ports in env = container ports',
    async () => {
      const objects = await render('defaults');
      const cpC = onlyContainer(cp(objects));
      const dpC = onlyContainer(dp(objects));
      const addr = envValue(dpC, 'CONTROL_PLANE_ADDR')!;
      const service = one(objects, 'Service', addr.split('.')[0]);
      const port = Number(addr.slice(addr.lastIndexOf(':') + 1));
      expect(servicePortTarget(service, port, cpC)).toBe(Number(envValue(cpC, 'GRPC_PORT')));
      expect(containerPort(cpC, 'grpc')).toBe(Number(envValue(cpC, 'GRPC_PORT')));
      expect(containerPort(cpC, 'admin')).toBe(Number(envValue(cpC, 'ADMIN_PORT')));
      expect(containerPort(dpC, 'http')).toBe(Number(envValue(dpC, 'PROXY_PORT')));
      // The DP's young generation is sized for memory (dataPlane.maxSemiSpaceSizeMiB, docs/operations.md "Data plane memory"), as the CP's is (controlPlane.maxSemiSpaceSizeMiB).
      // The DP runs as one bundled file (scripts/bundle.mjs), which the image holds instead of data-plane/dist.
      expect(dpC.args).toEqual(['node', '--max-semi-space-size=8', 'data-plane/bundle/main.js']);
      expect(containerPort(dpC, 'status')).toBe(Number(envValue(dpC, 'STATUS_PORT')));
      const dpService = one(objects, 'Service', dp(objects).metadata!.name);
      expect(servicePortTarget(dpService, 80, dpC)).toBe(Number(envValue(dpC, 'PROXY_PORT')));
    },
    T,
  );

  test(
    'probes: liveness /healthz and readiness /readyz on the admin (CP) and status (DP) listeners',
    async () => {
      const objects = await render('defaults');
      for (const [d, portVar] of [
        [cp(objects), 'ADMIN_PORT'],
        [dp(objects), 'STATUS_PORT'],
      ] as const) {
        const c = onlyContainer(d);
        expect(c.livenessProbe?.httpGet?.path).toBe('/healthz');
        expect(c.readinessProbe?.httpGet?.path).toBe('/readyz');
        for (const probe of [c.livenessProbe!, c.readinessProbe!]) {
          expect(containerPort(c, probe.httpGet!.port as string)).toBe(Number(envValue(c, portVar)));
        }
      }
    },
    T,
  );

  test(
    'Prometheus annotations name the port that serves /metrics',
    async () => {
      const objects = await render('defaults');
      for (const [d, portVar] of [
        [cp(objects), 'ADMIN_PORT'],
        [dp(objects), 'STATUS_PORT'],
      ] as const) {
        const annotations = d.spec!.template.metadata!.annotations!;
        expect(annotations['prometheus.io/scrape']).toBe('true');
        expect(annotations['prometheus.io/path']).toBe('/metrics');
        expect(annotations['prometheus.io/port']).toBe(envValue(onlyContainer(d), portVar));
      }
      expect(ofKind(objects, 'ServiceMonitor')).toEqual([]);
    },
    T,
  );

  test(
    'selectors match the pods they mean and only those; the HPA scales the DP Deployment',
    async () => {
      const objects = await render('defaults');
      const cpName = cp(objects).metadata!.name!;
      const dpName = dp(objects).metadata!.name!;
      for (const d of ofKind(objects, 'Deployment')) {
        expect(selectedDeployments(objects, d.spec.selector.matchLabels).map((x) => x.metadata!.name)).toEqual([d.metadata!.name]);
      }
      const expectations: Array<[string, string, string]> = [
        ['Service', cpName, cpName],
        ['Service', dpName, dpName],
        ['PodDisruptionBudget', cpName, cpName],
        ['PodDisruptionBudget', dpName, dpName],
      ];
      for (const [kind, name, target] of expectations) {
        const o = one(objects, kind, name);
        const selector = kind === 'Service' ? o.spec.selector : o.spec.selector.matchLabels;
        expect(selectedDeployments(objects, selector).map((x) => x.metadata!.name)).toEqual([target]);
      }
      const hpa = one(objects, 'HorizontalPodAutoscaler');
      expect(hpa.apiVersion).toBe('autoscaling/v2');
      expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: dpName });
      expect(hpa.spec).toMatchObject({ minReplicas: 2, maxReplicas: 10 });
      expect(hpa.spec.metrics).toEqual([{ type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 70 } } }]);
      // The HPA owns the DP replica count.
      expect(dp(objects).spec!.replicas).toBeUndefined();
      expect(one(objects, 'Service', dpName).spec.type).toBe('ClusterIP');
    },
    T,
  );

  test(
    'security: non-root, read-only root filesystem, no capabilities, no privilege escalation, RuntimeDefault seccomp; writes go to emptyDirs',
    async () => {
      const objects = await render('defaults');
      for (const d of ofKind(objects, 'Deployment')) {
        const spec = podSpecOf(d);
        expect(spec.securityContext?.seccompProfile?.type).toBe('RuntimeDefault');
        expect(spec.hostNetwork ?? false).toBe(false);
        for (const c of spec.containers) {
          const sc = c.securityContext!;
          const runAsUser = sc.runAsUser ?? spec.securityContext?.runAsUser;
          expect(sc.runAsNonRoot ?? spec.securityContext?.runAsNonRoot).toBe(true);
          expect(runAsUser).toBeGreaterThan(0);
          expect(sc.readOnlyRootFilesystem).toBe(true);
          expect(sc.allowPrivilegeEscalation).toBe(false);
          expect(sc.privileged ?? false).toBe(false);
          expect(sc.capabilities?.drop).toEqual(['ALL']);
          expect(sc.capabilities?.add ?? []).toEqual([]);
          expect(c.resources?.requests).toEqual(expect.objectContaining({ cpu: expect.anything(), memory: expect.anything() }));
          expect(c.resources?.limits).toEqual(expect.objectContaining({ cpu: expect.anything(), memory: expect.anything() }));
          // Every path a service writes (DATA_DIR, SNAPSHOT_CACHE) is on an emptyDir.
          for (const name of ['DATA_DIR', 'SNAPSHOT_CACHE']) {
            const path = envValue(c, name);
            if (path === undefined) continue;
            const { volume } = mountedFile(d, c, path);
            expect({ name, emptyDir: volume.emptyDir !== undefined }).toEqual({ name, emptyDir: true });
          }
          const tmp = (c.volumeMounts ?? []).find((m) => m.mountPath === '/tmp');
          expect(spec.volumes?.find((v) => v.name === tmp?.name)?.emptyDir).toBeDefined();
        }
      }
    },
    T,
  );

  test(
    'termination fits the grace period (preStop sleep + SHUTDOWN_TIMEOUT); replicas are spread over nodes',
    async () => {
      const objects = await render('defaults');
      for (const d of ofKind(objects, 'Deployment')) {
        const spec = podSpecOf(d);
        const c = onlyContainer(d);
        const sleep = Number(c.lifecycle?.preStop?.exec?.command?.[1] ?? 0);
        const shutdown = Number(/^(\d+)s$/.exec(envValue(c, 'SHUTDOWN_TIMEOUT')!)![1]);
        expect(sleep + shutdown).toBeLessThan(spec.terminationGracePeriodSeconds!);
        const term = spec.affinity!.podAntiAffinity!.preferredDuringSchedulingIgnoredDuringExecution![0].podAffinityTerm;
        expect(term.topologyKey).toBe('kubernetes.io/hostname');
        expect(selectedDeployments(objects, term.labelSelector!.matchLabels).map((x) => x.metadata!.name)).toEqual([d.metadata!.name]);
      }
      expect(onlyContainer(dp(objects)).lifecycle?.preStop?.exec?.command).toEqual(['sleep', '5']);
    },
    T,
  );

  test(
    'the CRDs are the chart’s crds/ (== deploy/crds), installed by Helm, not templated',
    async () => {
      const objects = await render('defaults');
      expect(ofKind(objects, 'CustomResourceDefinition')).toEqual([]);
      const withCrds = await renderChart({ extraArgs: ['--include-crds'] });
      const crds = ofKind(withCrds, 'CustomResourceDefinition')
        .map((c) => c.metadata!.name)
        .sort();
      expect(crds).toEqual([
        'apidefinitions.gatehouse.dev',
        'basicauthcredentials.gatehouse.dev',
        'keyauthcredentials.gatehouse.dev',
        'oauthservers.gatehouse.dev',
      ]);
      for (const file of [
        'gatehouse.dev_apidefinitions.yaml',
        'gatehouse.dev_basicauthcredentials.yaml',
        'gatehouse.dev_keyauthcredentials.yaml',
        'gatehouse.dev_oauthservers.yaml',
      ]) {
        expect(await readFile(join(CHART_DIR, 'crds', file), 'utf8')).toBe(await readFile(join(REPO_ROOT, 'deploy/crds', file), 'utf8'));
      }
    },
    T,
  );
});

describe('existing secrets', () => {
  test(
    'nothing is generated; the pods read the user’s Secrets and keys, REDIS_URL included',
    async () => {
      const objects = await render('existingSecrets');
      expect(ofKind(objects, 'Secret')).toEqual([]);
      const cpC = onlyContainer(cp(objects));
      expect(envVar(cpC, 'ADMIN_PASSWORD').valueFrom).toEqual({ secretKeyRef: { name: 'my-admin', key: 'pw' } });
      expect(envVar(cpC, 'KEY_AUTH_HASH_KEY').valueFrom).toEqual({ secretKeyRef: { name: 'my-key-auth-hash-key', key: 'hash-key' } });
      expect(envVar(cpC, 'ADMIN_JWT_SECRET').valueFrom).toEqual({ secretKeyRef: { name: 'my-admin', key: 'signing' } });
      const dpC = onlyContainer(dp(objects));
      expect(envVar(dpC, 'REDIS_URL').valueFrom).toEqual({ secretKeyRef: { name: 'my-redis', key: 'url' } });
      for (const c of [cpC, dpC]) expect(envVar(c, 'GRPC_JOIN_TOKEN').valueFrom).toEqual({ secretKeyRef: { name: 'my-join-token', key: 'token' } });
      for (const [d, secret] of [
        [cp(objects), 'my-cp-tls'],
        [dp(objects), 'my-dp-tls'],
      ] as const) {
        const c = onlyContainer(d);
        for (const [name, key] of [
          ['GRPC_TLS_CERT', 'tls.crt'],
          ['GRPC_TLS_KEY', 'tls.key'],
          ['GRPC_TLS_CA', 'ca.crt'],
        ]) {
          const file = mountedFile(d, c, envValue(c, name)!);
          expect({ name, secret: file.secretName, key: file.key }).toEqual({ name, secret, key });
        }
      }
      const names = new Set(ofKind(objects, 'Deployment').flatMap((d) => referencedConfig(podSpecOf(d)).secrets.map((s) => s.name)));
      expect([...names].sort()).toEqual(['my-admin', 'my-cp-tls', 'my-dp-tls', 'my-join-token', 'my-key-auth-hash-key', 'my-redis']);
    },
    T,
  );

  test(
    'without REDIS_URL configured, the data plane has no REDIS_URL (in-process token store)',
    async () => {
      expect(onlyContainer(dp(await render('defaults'))).env?.some((e) => e.name === 'REDIS_URL')).toBe(false);
    },
    T,
  );
});

describe('cert-manager', () => {
  test(
    'no issuer given: self-signed root → CA Certificate → CA Issuer signing both sides; Certificates write the mounted Secrets',
    async () => {
      const objects = await render('certManager');
      expect(
        ofKind(objects, 'Secret')
          .map((s) => s.metadata!.name)
          .sort(),
      ).toEqual(['gh-gatehouse-admin', 'gh-gatehouse-join-token', 'gh-gatehouse-key-auth-hash-key']);
      const issuers = ofKind(objects, 'Issuer');
      const selfSigned = issuers.find((i) => i.spec.selfSigned !== undefined)!;
      const caIssuer = issuers.find((i) => i.spec.ca !== undefined)!;
      const caCert = ofKind(objects, 'Certificate').find((c) => c.spec.isCA === true)!;
      expect(caCert.spec.issuerRef.name).toBe(selfSigned.metadata!.name);
      expect(caIssuer.spec.ca.secretName).toBe(caCert.spec.secretName);
      const cpC = onlyContainer(cp(objects));
      const addr = envValue(onlyContainer(dp(objects)), 'CONTROL_PLANE_ADDR')!;
      for (const [d, usage] of [
        [cp(objects), 'server auth'],
        [dp(objects), 'client auth'],
      ] as const) {
        const c = onlyContainer(d);
        const file = mountedFile(d, c, envValue(c, 'GRPC_TLS_CERT')!);
        const certificate = ofKind(objects, 'Certificate').find((x) => x.spec.secretName === file.secretName)!;
        expect(certificate).toBeDefined();
        expect(certificate.spec.issuerRef).toEqual({ name: caIssuer.metadata!.name, kind: 'Issuer', group: 'cert-manager.io' });
        expect(certificate.spec.usages).toContain(usage);
        expect(mountedFile(d, c, envValue(c, 'GRPC_TLS_CA')!).key).toBe('ca.crt');
        if (c === cpC) expect(certificate.spec.dnsNames).toContain(addr.slice(0, addr.lastIndexOf(':')));
      }
      const provided = providedSecrets(objects);
      for (const d of ofKind(objects, 'Deployment')) {
        for (const ref of referencedConfig(podSpecOf(d)).secrets) expect(provided.get(ref.name)).toEqual(expect.arrayContaining(ref.keys));
      }
    },
    T,
  );

  test(
    'with issuerRef: no Issuer of the chart, both Certificates reference the given one',
    async () => {
      const objects = await render('certManagerIssuer');
      expect(ofKind(objects, 'Issuer')).toEqual([]);
      const certificates = ofKind(objects, 'Certificate');
      expect(certificates).toHaveLength(2);
      for (const c of certificates) expect(c.spec.issuerRef).toEqual({ name: 'corp-ca', kind: 'ClusterIssuer', group: 'cert-manager.io' });
    },
    T,
  );
});

describe('scaling and exposure', () => {
  test(
    'autoscaling off: no HPA, dataPlane.replicas on the DP Deployment, CP replicas unchanged',
    async () => {
      const objects = await render('autoscalingOff');
      expect(ofKind(objects, 'HorizontalPodAutoscaler')).toEqual([]);
      expect(dp(objects).spec!.replicas).toBe(5);
      expect(cp(objects).spec!.replicas).toBe(2);
    },
    T,
  );

  test(
    'HPA bounds come from dataPlane.autoscaling and touch nothing of the control plane',
    async () => {
      const objects = await renderChart({
        values: { dataPlane: { autoscaling: { minReplicas: 3, maxReplicas: 30, targetCPUUtilizationPercentage: 55 } }, controlPlane: { replicas: 3 } },
      });
      expect(one(objects, 'HorizontalPodAutoscaler').spec).toMatchObject({
        minReplicas: 3,
        maxReplicas: 30,
        metrics: [{ resource: { target: { averageUtilization: 55 } } }],
      });
      expect(cp(objects).spec!.replicas).toBe(3);
    },
    T,
  );

  test(
    'a longer drain renders once the grace period covers it (DP: 1m30s + the 5 s preStop sleep < 120 s; CP: 24.5 s < 30 s)',
    async () => {
      const objects = await renderChart({
        values: { dataPlane: { shutdownTimeout: '1m30s', terminationGracePeriodSeconds: 120 }, controlPlane: { shutdownTimeout: '24.5s' } },
      });
      expect(dp(objects).spec!.template.spec!.terminationGracePeriodSeconds).toBe(120);
      expect(onlyContainer(dp(objects)).env).toContainEqual({ name: 'SHUTDOWN_TIMEOUT', value: '1m30s' });
      expect(onlyContainer(cp(objects)).env).toContainEqual({ name: 'SHUTDOWN_TIMEOUT', value: '24.5s' });
    },
    T,
  );

  test(
    "dataPlane.proxyCacheSize is the data planes' PROXY_CACHE_SIZE (64MB by default), and nothing of the control plane",
    async () => {
      expect(onlyContainer(dp(await renderChart({}))).env).toContainEqual({ name: 'PROXY_CACHE_SIZE', value: '64MB' });
      const objects = await renderChart({ values: { dataPlane: { proxyCacheSize: '512M' } } });
      expect(onlyContainer(dp(objects)).env).toContainEqual({ name: 'PROXY_CACHE_SIZE', value: '512M' });
      expect(onlyContainer(cp(objects)).env!.map((e) => e.name)).not.toContain('PROXY_CACHE_SIZE');
    },
    T,
  );

  test("dataPlane.trustedProxies is the data planes' TRUSTED_PROXIES, comma-joined; none by default, nothing of the control plane", async () => {
    expect(onlyContainer(dp(await renderChart({}))).env!.map((e) => e.name)).not.toContain('TRUSTED_PROXIES');
    const objects = await renderChart({ values: { dataPlane: { trustedProxies: ['10.0.0.0/8', '2001:db8::/32'] } } });
    expect(onlyContainer(dp(objects)).env).toContainEqual({ name: 'TRUSTED_PROXIES', value: '10.0.0.0/8,2001:db8::/32' });
    expect(onlyContainer(cp(objects)).env!.map((e) => e.name)).not.toContain('TRUSTED_PROXIES');
  });

  test(
    "controlPlane.maxSemiSpaceSizeMiB is the control plane's --max-semi-space-size (8 by default, checked above)",
    async () => {
      const objects = await renderChart({ extraArgs: ['--set', 'controlPlane.maxSemiSpaceSizeMiB=16'] });
      expect(onlyContainer(cp(objects)).args).toEqual(['node', '--max-semi-space-size=16', 'control-plane/bundle/main.js']);
    },
    T,
  );

  test(
    "dataPlane.maxSemiSpaceSizeMiB is the data plane's --max-semi-space-size (8 by default, checked above)",
    async () => {
      const objects = await renderChart({ extraArgs: ['--set', 'dataPlane.maxSemiSpaceSizeMiB=16'] });
      expect(onlyContainer(dp(objects)).args).toEqual(['node', '--max-semi-space-size=16', 'data-plane/bundle/main.js']);
    },
    T,
  );

  test(
    'LoadBalancer: the DP Service only, with its options; the CP stays internal',
    async () => {
      const objects = await render('loadBalancer');
      const service = one(objects, 'Service', dp(objects).metadata!.name);
      expect(service.spec).toMatchObject({ type: 'LoadBalancer', externalTrafficPolicy: 'Local', loadBalancerSourceRanges: ['10.0.0.0/8'] });
      expect(service.spec.ports).toEqual([{ name: 'http', port: 443, targetPort: 'http', protocol: 'TCP', nodePort: 30443 }]);
      expect(one(objects, 'Service', cp(objects).metadata!.name).spec.type).toBe('ClusterIP');
    },
    T,
  );

  test(
    'grpcTls.enabled=false: no TLS Secrets, no GRPC_TLS_* and no TLS volume on either side; the CP allows plaintext explicitly',
    async () => {
      const objects = await render('tlsOff');
      expect(
        ofKind(objects, 'Secret')
          .map((s) => s.metadata!.name)
          .sort(),
      ).toEqual(['gh-gatehouse-admin', 'gh-gatehouse-join-token', 'gh-gatehouse-key-auth-hash-key']);
      for (const d of ofKind(objects, 'Deployment')) {
        const c = onlyContainer(d);
        expect(c.env!.filter((e) => e.name.startsWith('GRPC_TLS'))).toEqual([]);
        expect(referencedConfig(podSpecOf(d)).secrets.filter((s) => s.where.startsWith('volume'))).toEqual([]);
      }
      // The CP binds the pod address: without TLS it refuses to start unless GRPC_INSECURE=true;
      // the DP sends its join token over plaintext only with GRPC_INSECURE=true too.
      expect(envValue(onlyContainer(cp(objects)), 'GRPC_INSECURE')).toBe('true');
      expect(envValue(onlyContainer(dp(objects)), 'GRPC_INSECURE')).toBe('true');
      expect(envValue(onlyContainer(cp(objects)), 'GRPC_TLS_CERT')).toBeUndefined();
    },
    T,
  );

  test(
    'grpcTls enabled (default): the CP does not set GRPC_INSECURE',
    async () => {
      const objects = await render('defaults');
      expect(envValue(onlyContainer(cp(objects)), 'GRPC_INSECURE')).toBeUndefined();
    },
    T,
  );

  test(
    'ServiceMonitors select Services that have the scraped port',
    async () => {
      const objects = await render('serviceMonitor');
      const monitors = ofKind(objects, 'ServiceMonitor');
      expect(monitors).toHaveLength(2);
      for (const monitor of monitors) {
        expect(monitor.metadata!.labels!.release).toBe('prom');
        const services = ofKind(objects, 'Service').filter((s) =>
          Object.entries(monitor.spec.selector.matchLabels as Record<string, string>).every(([k, v]) => s.metadata!.labels?.[k] === v),
        );
        expect(services).toHaveLength(1);
        const [endpoint] = monitor.spec.endpoints;
        const port = services[0].spec.ports.find((p: any) => p.name === endpoint.port);
        expect(endpoint.path).toBe('/metrics');
        const [target] = selectedDeployments(objects, services[0].spec.selector);
        const c = onlyContainer(target);
        const metricsPort = Number(envValue(c, target === cp(objects) ? 'ADMIN_PORT' : 'STATUS_PORT'));
        expect(containerPort(c, port.targetPort)).toBe(metricsPort);
      }
      // The status port never goes on the (possibly public) proxy Service.
      expect(one(objects, 'Service', dp(objects).metadata!.name).spec.ports.map((p: any) => p.name)).toEqual(['http']);
    },
    T,
  );
});

describe('HTTPS on the proxy listener', () => {
  test(
    "dataPlane.tls.existingSecret: PROXY_TLS_CERT / _KEY name the Secret's tls.crt / tls.key, mounted read-only; the CP is untouched",
    async () => {
      const objects = await render('proxyTls');
      const d = dp(objects);
      const c = onlyContainer(d);
      for (const [name, key] of [
        ['PROXY_TLS_CERT', 'tls.crt'],
        ['PROXY_TLS_KEY', 'tls.key'],
      ] as const) {
        const file = mountedFile(d, c, envValue(c, name)!);
        expect({ name, secret: file.secretName, key: file.key, readOnly: file.mount.readOnly }).toEqual({ name, secret: 'edge-tls', key, readOnly: true });
      }
      expect(onlyContainer(cp(objects)).env?.filter((e) => e.name.startsWith('PROXY_TLS_'))).toEqual([]);
      const service = ofKind(objects, 'Service').find((s) => s.metadata!.name!.endsWith('data-plane'))!;
      expect(service.spec.ports).toEqual([expect.objectContaining({ port: 443, targetPort: 'http' })]);
    },
    T,
  );

  test(
    'dataPlane.tls.clientCaSecret: PROXY_TLS_CLIENT_CA names its ca.crt, mounted read-only; minVersion is PROXY_TLS_MIN_VERSION',
    async () => {
      const objects = await render('proxyMtls');
      const d = dp(objects);
      const c = onlyContainer(d);
      const file = mountedFile(d, c, envValue(c, 'PROXY_TLS_CLIENT_CA')!);
      expect({ secret: file.secretName, key: file.key, readOnly: file.mount.readOnly }).toEqual({ secret: 'partner-ca', key: 'ca.crt', readOnly: true });
      expect(envValue(c, 'PROXY_TLS_MIN_VERSION')).toBe('TLSv1.3');
      expect(envValue(onlyContainer(dp(await render('proxyTls'))), 'PROXY_TLS_MIN_VERSION')).toBe('TLSv1.2');
      expect(envValue(onlyContainer(dp(await render('proxyTls'))), 'PROXY_TLS_CLIENT_CA')).toBeUndefined();
    },
    T,
  );

  test(
    'clientCaSecret without existingSecret (no TLS to ask over) adds nothing',
    async () => {
      const d = dp(await render('clientCaWithoutTls'));
      expect(onlyContainer(d).env?.filter((e) => e.name.startsWith('PROXY_TLS_'))).toEqual([]);
      expect(podSpecOf(d).volumes?.map((v) => v.name)).not.toContain('proxy-client-ca');
    },
    T,
  );

  test(
    'dataPlane.tls.http2: PROXY_HTTP2 is "true" with TLS by default, "false" when turned off, and unset without TLS',
    async () => {
      expect(envValue(onlyContainer(dp(await render('proxyTls'))), 'PROXY_HTTP2')).toBe('true');
      expect(envValue(onlyContainer(dp(await render('http2Off'))), 'PROXY_HTTP2')).toBe('false');
      expect(envValue(onlyContainer(dp(await render('defaults'))), 'PROXY_HTTP2')).toBeUndefined();
    },
    T,
  );

  test(
    'dataPlane.h2c: PROXY_H2C is "true" without TLS by default, "false" when turned off, and unset with TLS (h2 is ALPN\'s there)',
    async () => {
      expect(envValue(onlyContainer(dp(await render('defaults'))), 'PROXY_H2C')).toBe('true');
      expect(envValue(onlyContainer(dp(await render('h2cOff'))), 'PROXY_H2C')).toBe('false');
      expect(envValue(onlyContainer(dp(await render('proxyTls'))), 'PROXY_H2C')).toBeUndefined();
    },
    T,
  );

  test(
    'dataPlane.tls.redirectHttp: PROXY_HTTP_REDIRECT_PORT is the container port http-redirect, which the Service exposes on redirectPort (80)',
    async () => {
      const objects = await render('httpsRedirect');
      const d = dp(objects);
      const c = onlyContainer(d);
      const port = c.ports?.find((p) => p.name === 'http-redirect');
      expect(envValue(c, 'PROXY_HTTP_REDIRECT_PORT')).toBe(String(port?.containerPort));
      const service = ofKind(objects, 'Service').find((s) => s.metadata!.name!.endsWith('data-plane'))!;
      expect(service.spec.ports).toEqual([
        expect.objectContaining({ port: 443, targetPort: 'http' }),
        expect.objectContaining({ name: 'http-redirect', port: 80, targetPort: 'http-redirect' }),
      ]);
    },
    T,
  );

  test(
    'redirectHttp without existingSecret (nothing to redirect to) adds nothing',
    async () => {
      const objects = await render('redirectWithoutTls');
      const c = onlyContainer(dp(objects));
      expect(envValue(c, 'PROXY_HTTP_REDIRECT_PORT')).toBeUndefined();
      expect(c.ports?.map((p) => p.name)).toEqual(['http', 'status']);
    },
    T,
  );

  test(
    'no dataPlane.tls.existingSecret (the default): plain HTTP, no PROXY_TLS_* and no such volume',
    async () => {
      const d = dp(await render('defaults'));
      expect(onlyContainer(d).env?.filter((e) => e.name.startsWith('PROXY_TLS_'))).toEqual([]);
      expect(podSpecOf(d).volumes?.map((v) => v.name)).not.toContain('proxy-tls');
    },
    T,
  );
});

describe('TLS to upstreams', () => {
  test(
    "dataPlane.upstreamTls: UPSTREAM_CA_FILE names caSecret's ca.crt, UPSTREAM_TLS_CERT / _KEY clientSecret's tls.crt / tls.key, mounted read-only",
    async () => {
      const objects = await render('upstreamTls');
      const d = dp(objects);
      const c = onlyContainer(d);
      for (const [name, secret, key] of [
        ['UPSTREAM_CA_FILE', 'internal-ca', 'ca.crt'],
        ['UPSTREAM_TLS_CERT', 'gateway-client', 'tls.crt'],
        ['UPSTREAM_TLS_KEY', 'gateway-client', 'tls.key'],
      ] as const) {
        const file = mountedFile(d, c, envValue(c, name)!);
        expect({ name, secret: file.secretName, key: file.key, readOnly: file.mount.readOnly }).toEqual({ name, secret, key, readOnly: true });
      }
      expect(onlyContainer(cp(objects)).env?.filter((e) => e.name.startsWith('UPSTREAM_'))).toEqual([]);
    },
    T,
  );

  test(
    'by default: no UPSTREAM_* and no such volume',
    async () => {
      const d = dp(await render('defaults'));
      expect(onlyContainer(d).env?.filter((e) => e.name.startsWith('UPSTREAM_'))).toEqual([]);
      const volumes = podSpecOf(d).volumes?.map((v) => v.name);
      expect(volumes).not.toContain('upstream-ca');
      expect(volumes).not.toContain('upstream-client');
    },
    T,
  );
});

describe('tracing', () => {
  const OTEL = ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_PROTOCOL', 'OTEL_TRACES_SAMPLER', 'OTEL_TRACES_SAMPLER_ARG'];
  const otelEnv = (d: ReturnType<typeof cp>) =>
    Object.fromEntries(OTEL.map((name) => [name, envValue(onlyContainer(d), name)]).filter(([, value]) => value !== undefined));

  test(
    'tracing.endpoint: both services export there, in tracing.protocol, with the sampler',
    async () => {
      const objects = await render('tracing');
      for (const d of [cp(objects), dp(objects)]) {
        expect(otelEnv(d)).toEqual({
          OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel-collector.observability:4317',
          OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
          OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
          OTEL_TRACES_SAMPLER_ARG: '0.1',
        });
      }
    },
    T,
  );

  test(
    'no tracing.endpoint (the default): no OTEL_* variable on either side, so nothing is exported',
    async () => {
      const objects = await render('defaults');
      for (const d of [cp(objects), dp(objects)]) expect(onlyContainer(d).env?.filter((e) => e.name.startsWith('OTEL_'))).toEqual([]);
    },
    T,
  );
});

describe('wrong values are refused with a message naming them', () => {
  test.each([
    ['a Service type that does not exist', { dataPlane: { service: { type: 'Ingress' } } }, ["'/dataPlane/service/type'", 'ClusterIP', 'LoadBalancer']],
    ['a misspelt key', { dataPlane: { replica: 3 } }, ["'/dataPlane'", "'replica' not allowed"]],
    ['a replica count as a string', { controlPlane: { replicas: 'two' } }, ["'/controlPlane/replicas'", 'want integer']],
    ['no control-plane replica', { controlPlane: { replicas: 0 } }, ["'/controlPlane/replicas'", 'minimum']],
    [
      'a CPU target over 100%',
      { dataPlane: { autoscaling: { targetCPUUtilizationPercentage: 150 } } },
      ["'/dataPlane/autoscaling/targetCPUUtilizationPercentage'", 'maximum'],
    ],
    [
      'a lease duration without unit',
      { controlPlane: { leaderElection: { leaseDuration: '15' } } },
      ["'/controlPlane/leaderElection/leaseDuration'", 'pattern'],
    ],
    ['an unknown TLS source', { grpcTls: { source: 'vault' } }, ["'/grpcTls/source'", 'certManager']],
    [
      'existingSecret TLS without Secret names',
      { grpcTls: { source: 'existingSecret' } },
      ["'/grpcTls/existingSecret/controlPlane'", "'/grpcTls/existingSecret/dataPlane'"],
    ],
    ['running as root', { securityContext: { runAsUser: 0 } }, ["'/securityContext/runAsUser'", 'minimum']],
    ['a proxy TLS Secret name that is not a name', { dataPlane: { tls: { existingSecret: 'Edge TLS' } } }, ["'/dataPlane/tls/existingSecret'", 'pattern']],
    ['an unknown OTLP protocol', { tracing: { protocol: 'http' } }, ["'/tracing/protocol'", 'http/protobuf']],
    ['a collector address without scheme', { tracing: { endpoint: 'otel-collector:4318' } }, ["'/tracing/endpoint'", 'pattern']],
    ['a sampling ratio over 1', { tracing: { samplerArg: '10' } }, ["'/tracing/samplerArg'", 'pattern']],
    [
      'a discovery namespace that is not a name',
      { controlPlane: { discovery: { namespaces: ['Shop'] } } },
      ["'/controlPlane/discovery/namespaces/0'", 'pattern'],
    ],
    ['an unknown log level', { dataPlane: { logLevel: 'verbose' } }, ["'/dataPlane/logLevel'", 'info']],
    ['a proxy cache size that is not a size', { dataPlane: { proxyCacheSize: 'lots' } }, ["'/dataPlane/proxyCacheSize'", 'pattern']],
    ['no young generation', { dataPlane: { maxSemiSpaceSizeMiB: 0 } }, ["'/dataPlane/maxSemiSpaceSizeMiB'", 'minimum']],
    ['a semi-space size over 64 MiB', { dataPlane: { maxSemiSpaceSizeMiB: 65 } }, ["'/dataPlane/maxSemiSpaceSizeMiB'", 'maximum']],
    ['a semi-space size as a string', { dataPlane: { maxSemiSpaceSizeMiB: '16' } }, ["'/dataPlane/maxSemiSpaceSizeMiB'", 'want integer']],
    [
      'an HPA scale-down rule the autoscaling/v2 API does not have',
      { dataPlane: { autoscaling: { behavior: { scaleDown: { stabilizationWindow: '10s' } } } } },
      ["'/dataPlane/autoscaling/behavior/scaleDown'", "'stabilizationWindow' not allowed"],
    ],
    [
      'an HPA policy of an unknown type',
      { dataPlane: { autoscaling: { behavior: { scaleUp: { policies: [{ type: 'Cpu', value: 1, periodSeconds: 15 }] } } } } },
      ["'/dataPlane/autoscaling/behavior/scaleUp/policies/0/type'", 'Percent'],
    ],
    [
      'HPA minimum above maximum',
      { dataPlane: { autoscaling: { minReplicas: 5, maxReplicas: 3 } } },
      ['dataPlane.autoscaling.minReplicas (5) must not be greater than dataPlane.autoscaling.maxReplicas (3)'],
    ],
    [
      'a nodePort on a ClusterIP Service',
      { dataPlane: { service: { nodePort: 30080 } } },
      ['dataPlane.service.nodePort needs dataPlane.service.type NodePort or LoadBalancer'],
    ],
    [
      'two replicas without leader election',
      { controlPlane: { leaderElection: { enabled: false } } },
      ['controlPlane.leaderElection.enabled=false allows one control-plane replica only'],
    ],
    [
      'a data-plane drain longer than its grace period',
      { dataPlane: { shutdownTimeout: '60s' } },
      [
        'dataPlane.terminationGracePeriodSeconds (30) must be greater than the 70 s a graceful stop may take (preStopSleepSeconds + shutdownDelay + shutdownTimeout 60s)',
      ],
    ],
    [
      'a data-plane drain delay that leaves no time for the drain',
      { dataPlane: { shutdownDelay: '20s' } },
      [
        'dataPlane.terminationGracePeriodSeconds (30) must be greater than the 35 s a graceful stop may take (preStopSleepSeconds + shutdownDelay + shutdownTimeout 10s)',
      ],
    ],
    [
      'a data-plane drain exactly as long as its grace period',
      { dataPlane: { shutdownTimeout: '20s' } },
      ['dataPlane.terminationGracePeriodSeconds (30) must be greater than the 30 s'],
    ],
    [
      'a control-plane drain longer than its grace period',
      { controlPlane: { shutdownTimeout: '1m30s' } },
      ['controlPlane.terminationGracePeriodSeconds (30) must be greater than the 90 s'],
    ],
  ])(
    '%s',
    async (_row, values, fragments) => {
      const message = await renderChartError(values);
      for (const fragment of fragments) expect(message).toContain(fragment);
    },
    T,
  );
});

test(
  'every value set renders objects that parse, each with a name and the release namespace',
  async () => {
    for (const set of Object.keys(VALUE_SETS)) {
      for (const o of await render(set)) {
        expect({ set, kind: o.kind, name: typeof o.metadata?.name }).toEqual({ set, kind: o.kind, name: 'string' });
        expect({ set, kind: o.kind, namespace: o.metadata?.namespace }).toEqual({ set, kind: o.kind, namespace: NS });
      }
    }
  },
  T,
);
