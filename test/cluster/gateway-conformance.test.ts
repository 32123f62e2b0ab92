/**
 * The upstream Gateway API conformance suite (sigs.k8s.io/gateway-api, built by scripts/conformance-tools.sh) run
 * for the GATEWAY-HTTP and GATEWAY-GRPC profiles at once against Gatehouse installed by its chart, with the Gateway
 * API enabled, on the test node (scripts/test-cluster.sh), as scripts/conformance.sh runs it by hand. Its report,
 * written to the test artifacts and never over the committed ones, is compared with each profile's
 * docs/conformance/gatehouse-<PROFILE>.yaml: every core test that passed there passes again and each extended
 * feature declared there is declared and passes again. The tests that did not pass there are skipped (each of the
 * 404 ones waits a minute); GATEHOUSE_CONFORMANCE_BASELINE names another directory of reports to compare with. The
 * release, its GatewayClass and the suite's namespaces are removed after.
 */
import { accessSync, constants as fsConstants, existsSync, readFileSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { compareWithBaseline, notPassed, readConformanceProfile } from '../helpers/conformance-report.js';
import { CHART_DIR } from '../helpers/helm.js';
import { REPO_ROOT } from '../helpers/service-process.js';
import { helm, inNode, kubectl, kubectlOk, nodeUnavailable, run, testNode, TOOLS_BIN, type TestNode } from '../helpers/test-node.js';

const PROFILES = ['GATEWAY-HTTP', 'GATEWAY-GRPC'];
const BASELINE_DIR = process.env.GATEHOUSE_CONFORMANCE_BASELINE ?? join(REPO_ROOT, 'docs', 'conformance');
const baselineOf = (profile: string) => join(BASELINE_DIR, `gatehouse-${profile}.yaml`);
const nameOf = (file: string) => (file.startsWith(`${REPO_ROOT}/`) ? relative(REPO_ROOT, file) : file);
// A release, class and controller of its own: a release scripts/conformance.sh left on the node does not answer for them.
const NS = 'gatehouse-conformance';
const RELEASE = 'gatehouse';
const CLASS = 'gatehouse-conformance';
const CONTROLLER = 'gatehouse.dev/conformance-test';
/** The namespaces of the suite's base manifests. */
const SUITE_NAMESPACES = ['gateway-conformance-infra', 'gateway-conformance-app-backend', 'gateway-conformance-web-backend'];

const SUITE_BIN = join(TOOLS_BIN, 'gateway-conformance.test');
const CRDS_DIR = join(dirname(TOOLS_BIN), 'gateway-api');
const IMAGES_DIR = process.env.GATEHOUSE_IMAGES_DIR ?? join(homedir(), '.cache', 'gatehouse', 'images');
/** The suite's echo backend and CoreDNS, under the names its manifests use (scripts/conformance-tools.sh). */
const SUITE_IMAGES = ['echo-basic.oci.tar', 'conformance-coredns.oci.tar'].map((archive) => join(IMAGES_DIR, archive));
const ARTIFACTS = join(process.env.GATEHOUSE_TEST_ARTIFACTS ?? join(tmpdir(), 'gatehouse-test-artifacts'), 'conformance');

function conformanceUnavailable(): string | undefined {
  try {
    accessSync(SUITE_BIN, fsConstants.X_OK);
  } catch {
    return `${SUITE_BIN} is missing: run bash scripts/conformance-tools.sh`;
  }
  for (const archive of SUITE_IMAGES) if (!existsSync(archive)) return `${archive} is missing: run bash scripts/conformance-tools.sh`;
  if (!existsSync(join(CRDS_DIR, 'gateway.networking.k8s.io_gateways.yaml')))
    return `the Gateway API CRDs are missing in ${CRDS_DIR}: run bash scripts/test-tools.sh`;
  if (!existsSync('/usr/bin/ctr')) return '/usr/bin/ctr is missing: apt-get install containerd';
  return undefined;
}

const unavailable = nodeUnavailable() ?? conformanceUnavailable();
if (unavailable && process.env.CI === 'true') {
  test('the conformance suite can run here', () => {
    throw new Error(`the Gateway API conformance suite cannot run: ${unavailable}`);
  });
} else if (unavailable) {
  console.log(`the Gateway API conformance test is skipped: ${unavailable}`);
}

const seconds = (since: number): string => `${((Date.now() - since) / 1000).toFixed(1)} s`;

/**
 * Removes what this file and the suite create, and waits until it is gone, so that the next test file finds the node
 * as before; each step tolerates what is already gone. The release goes before its namespace (which holds helm's
 * record of it: deleted first, the release's cluster-wide RBAC would stay).
 */
async function removeAll(): Promise<void> {
  const release = (async () => {
    await helm(['uninstall', RELEASE, '-n', NS, '--wait', '--ignore-not-found'], { timeoutMs: 150_000 });
    await kubectl(['delete', 'namespace', NS, '--ignore-not-found', '--wait=true', '--timeout=120s'], { timeoutMs: 150_000 });
  })();
  await Promise.all([
    release,
    kubectl(['delete', 'gatewayclass', CLASS, '--ignore-not-found', '--wait=true'], { timeoutMs: 60_000 }),
    kubectl(['delete', 'namespace', ...SUITE_NAMESPACES, '--ignore-not-found', '--wait=true', '--timeout=120s'], { timeoutMs: 150_000 }),
  ]);
  const left = await kubectlOk(['get', 'namespace', NS, ...SUITE_NAMESPACES, '--ignore-not-found', '-o', 'name']);
  if (left.trim() !== '') throw new Error(`still on the node after cleanup: ${left.trim().split('\n').join(', ')}`);
}

let node: TestNode;

const title = `Gateway API conformance, ${PROFILES.join(' and ')} profiles, on a one-node cluster`;
(unavailable ? describe.skip : describe)(unavailable ? `${title} (skipped: ${unavailable})` : title, () => {
  beforeAll(async () => {
    let t0 = Date.now();
    node = await testNode();
    console.log(`test node up, images loaded: ${seconds(t0)}`);
    t0 = Date.now();
    // What an earlier run left (a suite namespace still terminating would refuse the suite's objects).
    await removeAll();
    for (const archive of SUITE_IMAGES) {
      const imported = await run('ctr', ['-a', node.containerd, '-n', 'k8s.io', 'images', 'import', archive], { timeoutMs: 120_000 });
      if (imported.code !== 0) throw new Error(`ctr images import ${archive}: ${imported.stderr}`);
    }
    await kubectlOk(['apply', '--server-side', '-f', CRDS_DIR], { timeoutMs: 60_000 });
    await kubectlOk(
      ['wait', '--for=condition=Established', '--timeout=60s', 'crd/gateways.gateway.networking.k8s.io', 'crd/httproutes.gateway.networking.k8s.io'],
      {
        timeoutMs: 70_000,
      },
    );
    const image = node.gatehouseImage;
    const install = await helm(
      [
        'install',
        RELEASE,
        CHART_DIR,
        '-n',
        NS,
        '--create-namespace',
        '--wait',
        '--timeout=4m',
        '--set',
        `image.repository=${image.slice(0, image.lastIndexOf(':'))}`,
        '--set',
        `image.tag=${image.slice(image.lastIndexOf(':') + 1)}`,
        '--set',
        'image.pullPolicy=Never',
        '--set',
        'controlPlane.gatewayApi.enabled=true',
        '--set',
        `controlPlane.gatewayApi.controllerName=${CONTROLLER}`,
      ],
      { timeoutMs: 270_000 },
    );
    if (install.code !== 0) throw new Error(`helm install failed: ${install.stderr}`);
    await kubectlOk(['apply', '-f', '-'], {
      input: `apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: { name: ${CLASS} }\nspec: { controllerName: ${CONTROLLER} }\n`,
    });
    console.log(`earlier run removed, suite images imported, CRDs applied, helm install --wait: ${seconds(t0)}`);
  }, 600_000);

  afterAll(async () => {
    if (!node) return;
    const t0 = Date.now();
    await removeAll();
    console.log(`release, GatewayClass and namespaces removed: ${seconds(t0)}`);
  }, 400_000);

  test(`every core test that passed in the committed ${PROFILES.join(' and ')} reports passes again, and every extended feature they declare`, async () => {
    const baselines = PROFILES.map((profile) => readConformanceProfile(baselineOf(profile), profile));
    const skipped = [...new Set(baselines.flatMap((b) => [...notPassed(b.core), ...notPassed(b.extended)]))];
    // Each profile adds its core features; naming one keeps the suite from reading the features off the GatewayClass.
    const features = [...new Set(['Gateway', ...baselines.flatMap((b) => b.extended?.supportedFeatures ?? [])])];
    const version = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
    await mkdir(ARTIFACTS, { recursive: true });
    const reportFile = join(ARTIFACTS, 'gatehouse-report.yaml');
    const logFile = join(ARTIFACTS, 'suite.log');
    await rm(reportFile, { force: true });
    const args = [
      '-test.run=TestConformance',
      '-test.v',
      '-test.timeout=12m',
      `-gateway-class=${CLASS}`,
      `-supported-features=${features.join(',')}`,
      `-conformance-profiles=${PROFILES.join(',')}`,
      `-report-output=${reportFile}`,
      '-organization=gatehouse',
      '-project=gatehouse',
      '-url=https://gatehouse.dev',
      `-version=v${version}`,
      '-contact=gatehouse-maintainers',
      '-mode=default',
      ...(skipped.length > 0 ? [`-skip-tests=${skipped.join(',')}`] : []),
    ];
    const t0 = Date.now();
    const suite = await inNode(SUITE_BIN, args, { env: { KUBECONFIG: node.kubeconfig }, timeoutMs: 750_000 });
    await writeFile(logFile, suite.stdout + suite.stderr);
    const failedLines = (suite.stdout.match(/^\s*--- FAIL: TestConformance\/\S+ .*$/gm) ?? []).join('\n');
    console.log(`the suite (${skipped.length} tests skipped: ${skipped.join(', ') || 'none'}) exited ${suite.code} in ${seconds(t0)}; log: ${logFile}`);
    if (!existsSync(reportFile))
      throw new Error(`the suite wrote no report (exit ${suite.code}); its log ${logFile} ends:\n${(suite.stdout + suite.stderr).slice(-4000)}`);

    const compared = PROFILES.map((profile, i) => {
      const baseline = baselines[i]!;
      const now = readConformanceProfile(reportFile, profile);
      const { regressions, newlyPassing } = compareWithBaseline(baseline, now);
      const name = nameOf(baselineOf(profile));
      if (newlyPassing.length > 0)
        console.log(`passing now and not in ${name}: ${newlyPassing.join(', ')} (update the report with PROFILE=${profile} scripts/conformance.sh)`);
      return { baseline: name, regressions, passed: now.core.statistics.Passed, passedBefore: baseline.core.statistics.Passed };
    });
    if (compared.some((c) => c.regressions.length > 0)) console.log(`the suite's failures:\n${failedLines}\nlog: ${logFile}, report: ${reportFile}`);
    expect(compared.map(({ baseline, regressions }) => ({ baseline, regressions }))).toEqual(compared.map(({ baseline }) => ({ baseline, regressions: [] })));
    for (const c of compared) expect(c.passed).toBeGreaterThanOrEqual(c.passedBefore);
  }, 800_000);
});
