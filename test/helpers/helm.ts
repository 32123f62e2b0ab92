/**
 * The real `helm` binary (built by `bash scripts/test-tools.sh` into the same tools directory as
 * kube-apiserver and etcd) and what the chart tests do with it: run it, render the chart with a
 * value set and parse the objects. A missing binary is a loud failure, never a skip.
 */
import { execFile } from 'node:child_process';
import { accessSync, constants as fsConstants } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadAllYaml, type KubernetesObject } from '@kubernetes/client-node';
import { REPO_ROOT } from './service-process.js';

/** `${GATEHOUSE_TOOLS_DIR:-~/.cache/gatehouse/tools}/bin/helm`, as scripts/test-tools.sh builds it. */
export const HELM_BIN = join(process.env.GATEHOUSE_TOOLS_DIR ?? join(homedir(), '.cache', 'gatehouse', 'tools'), 'bin', 'helm');
export const CHART_DIR = join(REPO_ROOT, 'helm', 'gatehouse');

/** Throws with build instructions when helm is missing. */
export function requireHelm(): string {
  try {
    accessSync(HELM_BIN, fsConstants.X_OK);
  } catch {
    throw new Error(
      `helm not found at ${HELM_BIN}: run bash scripts/test-tools.sh (builds the pinned helm, kube-apiserver and etcd; ` +
        'GATEHOUSE_TOOLS_DIR overrides ~/.cache/gatehouse/tools)',
    );
  }
  return HELM_BIN;
}

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface HelmOptions {
  /** KUBECONFIG for commands that reach a cluster. */
  kubeconfig?: string;
  timeoutMs?: number;
}

/** Runs helm with `args`; never throws on a non-zero exit (tests assert on `code` and `stderr`). */
export function runHelm(args: readonly string[], options: HelmOptions = {}): Promise<HelmResult> {
  const bin = requireHelm();
  // A private HOME-like state per call: no user repositories, plugins or cache leak in.
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? tmpdir(),
    HELM_CACHE_HOME: join(tmpdir(), 'gatehouse-helm-cache'),
    HELM_CONFIG_HOME: join(tmpdir(), 'gatehouse-helm-config'),
    HELM_DATA_HOME: join(tmpdir(), 'gatehouse-helm-data'),
  };
  if (options.kubeconfig) env.KUBECONFIG = options.kubeconfig;
  return new Promise((resolve, reject) => {
    execFile(bin, [...args], { env, cwd: REPO_ROOT, timeout: options.timeoutMs ?? 120_000, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err && typeof (err as NodeJS.ErrnoException).code === 'string') {
        reject(new Error(`helm ${args.join(' ')}: ${err.message}`));
        return;
      }
      const code = err ? ((err as { code?: number }).code ?? 1) : 0;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

/** Like runHelm, but a non-zero exit throws with helm's stderr. */
export async function helmOk(args: readonly string[], options: HelmOptions = {}): Promise<string> {
  const result = await runHelm(args, options);
  if (result.code !== 0) throw new Error(`helm ${args.join(' ')} exited with ${result.code}:\n${result.stderr}${result.stdout}`);
  return result.stdout;
}

/** Writes `values` to a temporary file and returns `['-f', path]` plus a cleanup. */
export async function valuesFile(values: Record<string, unknown>): Promise<{ args: string[]; dispose(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-values-'));
  const path = join(dir, 'values.json');
  // JSON is YAML: no quoting mistakes.
  await writeFile(path, JSON.stringify(values));
  return { args: ['-f', path], dispose: () => rm(dir, { recursive: true, force: true }) };
}

export interface RenderOptions {
  release?: string;
  namespace?: string;
  values?: Record<string, unknown>;
  /** Extra helm arguments (e.g. --include-crds, --kube-version). */
  extraArgs?: readonly string[];
}

/** Parses a multi-document YAML stream into objects (empty documents dropped). */
export function parseObjects(yaml: string): KubernetesObject[] {
  return (loadAllYaml(yaml) as Array<KubernetesObject | null>).filter((o): o is KubernetesObject => o !== null && typeof o === 'object');
}

/** `helm template` of the chart; throws with helm's message when rendering fails. */
export async function renderChart(options: RenderOptions = {}): Promise<KubernetesObject[]> {
  const stdout = await renderChartText(options);
  return parseObjects(stdout);
}

export async function renderChartText(options: RenderOptions = {}): Promise<string> {
  const file = options.values ? await valuesFile(options.values) : undefined;
  try {
    return await helmOk([
      'template',
      options.release ?? 'gh',
      CHART_DIR,
      '--namespace',
      options.namespace ?? 'gatehouse',
      ...(file?.args ?? []),
      ...(options.extraArgs ?? []),
    ]);
  } finally {
    await file?.dispose();
  }
}

/** `helm template` expected to fail: resolves with helm's stderr. */
export async function renderChartError(values: Record<string, unknown>): Promise<string> {
  const file = await valuesFile(values);
  try {
    const result = await runHelm(['template', 'gh', CHART_DIR, '--namespace', 'gatehouse', ...file.args]);
    if (result.code === 0) throw new Error(`helm template succeeded with values ${JSON.stringify(values)}; expected a refusal`);
    return result.stderr;
  } finally {
    await file.dispose();
  }
}

/** The Secrets `bash deploy/grpc-tls-secrets.sh <namespace>` prints (for the plain manifests), parsed. */
export function tlsSecretsFromScript(namespace = 'gatehouse'): Promise<KubernetesObject[]> {
  return new Promise((resolve, reject) => {
    execFile('bash', ['deploy/grpc-tls-secrets.sh', namespace], { cwd: REPO_ROOT, maxBuffer: 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`deploy/grpc-tls-secrets.sh failed: ${err.message}\n${stderr}`));
      else resolve(parseObjects(String(stdout)));
    });
  });
}
