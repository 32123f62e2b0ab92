/**
 * A real Kubernetes control plane for tests: etcd + kube-apiserver (built by
 * `bash scripts/test-tools.sh` into ~/.cache/gatehouse/tools/bin) on free loopback ports, as child
 * processes owned by the test. No controller-manager or scheduler runs: what is stored is what the
 * apiserver alone does (CRUD, watches, RBAC, admission, the TokenRequest API), which is all the
 * Kubernetes store needs. Missing binaries = a loud failure, never a silent skip.
 *
 * Per run: a CA + serving certificate (test-certificates.ts), an admin token (user
 * `gatehouse-admin`, group `system:masters`) and a service-account signing key, so tokens issued
 * by the TokenRequest API verify across apiserver restarts of the same run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { accessSync, constants as fsConstants, existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { request as httpsRequest } from 'node:https';
import { request as httpRequest } from 'node:http';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { freePort, freePorts } from './free-port.js';
import { createTestCertificates, type CertificateFiles } from './test-certificates.js';

/** Where scripts/test-tools.sh puts kube-apiserver, etcd and helm. */
export const KUBE_TOOLS_BIN = join(process.env.GATEHOUSE_TOOLS_DIR ?? join(homedir(), '.cache', 'gatehouse', 'tools'), 'bin');
export const KUBE_APISERVER_BIN = join(KUBE_TOOLS_BIN, 'kube-apiserver');
export const ETCD_BIN = join(KUBE_TOOLS_BIN, 'etcd');
export const HELM_BIN = join(KUBE_TOOLS_BIN, 'helm');

export const ADMIN_USER = 'gatehouse-admin';
export const SERVICE_ACCOUNT_ISSUER = 'https://kubernetes.default.svc.cluster.local';

export interface KubeApiServer {
  /** `https://127.0.0.1:<port>`; stays the same across stopApiServer()/startApiServer(). */
  url: string;
  /** PEM file of the CA that signed the serving certificate. */
  caFile: string;
  caPem: string;
  /** Bearer token of `gatehouse-admin` (group system:masters: everything is allowed). */
  adminToken: string;
  /** Per-run directory (etcd data, keys, kubeconfigs); removed by stop(). */
  dir: string;
  /** Writes a kubeconfig (this cluster, the CA, a user with `token`); returns its path. */
  writeKubeconfig(token: string, path?: string, namespace?: string): Promise<string>;
  /** Creates the ServiceAccount if missing (the namespace must exist) and returns a TokenRequest token. */
  serviceAccountToken(namespace: string, name: string, expirationSeconds?: number): Promise<string>;
  /** Stops kube-apiserver only (etcd keeps the data): for outage/restart tests. */
  stopApiServer(): Promise<void>;
  /** SIGSTOP / SIGCONT of kube-apiserver: it keeps its connections and accepts new ones but answers nothing meanwhile. */
  pauseApiServer(): void;
  resumeApiServer(): void;
  /** Starts kube-apiserver again on the same port, etcd and keys; resolves once /readyz is 200. */
  startApiServer(): Promise<void>;
  /** Stops both (SIGTERM, SIGKILL after 5 s) and removes `dir`. Idempotent. */
  stop(): Promise<void>;
  /** The last `n` lines of etcd's and kube-apiserver's output, for failure messages. */
  recentLogs(n?: number): string;
}

export interface KubeApiServerOptions {
  /** Deadline for each of etcd and kube-apiserver to become ready (default 90 s: a busy 2-core CI). */
  timeoutMs?: number;
  /** Appended to kube-apiserver's arguments (later flags win). */
  extraApiServerArgs?: readonly string[];
}

export type KubeTool = 'kube-apiserver' | 'etcd' | 'helm';
const ALL_TOOLS: readonly KubeTool[] = ['kube-apiserver', 'etcd', 'helm'];

/** Paths of the tools (of `tools`) that are not executable files. */
export function missingKubeTools(tools: readonly KubeTool[] = ALL_TOOLS): string[] {
  return tools
    .map((tool) => join(KUBE_TOOLS_BIN, tool))
    .filter((bin) => {
      try {
        accessSync(bin, fsConstants.X_OK);
        return false;
      } catch {
        return true;
      }
    });
}

/** Throws with build instructions when a tool is missing (in CI and elsewhere alike). */
export function requireKubeTools(tools: readonly KubeTool[] = ALL_TOOLS): void {
  const missing = missingKubeTools(tools);
  if (missing.length > 0) {
    throw new Error(
      `Kubernetes test tools missing (${missing.join(', ')}${process.env.CI === 'true' ? ', CI=true' : ''}): ` +
        'build them with `bash scripts/test-tools.sh` (.ci/run does this; a cold build takes 10-20 minutes; ' +
        'GATEHOUSE_TOOLS_DIR overrides ~/.cache/gatehouse/tools)',
    );
  }
}

const KEPT_LINES = 300;
const STOP_GRACE_MS = 5000;

// PR_SET_PDEATHSIG through util-linux's setpriv (it execs, so the pid is the tool's own): the
// children die with this process even when it is SIGKILLed and no 'exit' handler can run.
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((path) => existsSync(path));

interface Child {
  name: string;
  process: ChildProcess;
  exited: Promise<void>;
  running(): boolean;
  output(): string;
  stop(): Promise<void>;
}

function spawnChild(name: string, bin: string, args: string[], logs: string[]): Child {
  const [command, argv] = SETPRIV ? [SETPRIV, ['--pdeathsig', 'KILL', '--', bin, ...args]] : [bin, args];
  const child = spawn(command, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  let own = '';
  const keep = (line: string): void => {
    logs.push(`[${name}] ${line}`);
    if (logs.length > KEPT_LINES) logs.shift();
    if (own.length < 64_000) own += `${line}\n`;
  };
  createInterface({ input: child.stdout! }).on('line', keep);
  createInterface({ input: child.stderr! }).on('line', keep);
  // A test worker that exits without calling stop() must not leave etcd/apiserver holding ports.
  const killOnExit = (): void => {
    child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => {
      process.removeListener('exit', killOnExit);
      resolve();
    });
    // spawn failure (ENOENT...): 'exit' may never come.
    child.once('error', (err) => {
      keep(`spawn failed: ${err.message}`);
      process.removeListener('exit', killOnExit);
      resolve();
    });
  });
  const running = (): boolean => child.exitCode === null && child.signalCode === null && child.pid !== undefined;
  return {
    name,
    process: child,
    exited,
    running,
    output: () => own,
    async stop() {
      if (!running()) return exited;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
      await exited;
      clearTimeout(timer);
    },
  };
}

interface HttpResult {
  status: number;
  body: string;
}

/** One HTTP(S) request without keep-alive (no socket may keep a Jest worker alive). */
function call(url: string, options: { method?: string; token?: string; ca?: string; body?: unknown; timeoutMs?: number } = {}): Promise<HttpResult> {
  const target = new URL(url);
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
  const headers: Record<string, string> = { accept: 'application/json' };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (payload !== undefined) {
    headers['content-type'] = 'application/json';
    headers['content-length'] = String(Buffer.byteLength(payload));
  }
  const request = target.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(target, { method: options.method ?? 'GET', headers, ca: options.ca, agent: false, timeout: options.timeoutMs ?? 10_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${options.method ?? 'GET'} ${url} timed out`)));
    req.on('error', reject);
    req.end(payload);
  });
}

const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Status writes (PUT …/<plural>/<name>/status) the apiserver answered 200, from its own request counter:
 * a write that changes nothing is counted here but changes no resourceVersion.
 */
export async function statusWritesServed(server: Pick<KubeApiServer, 'url' | 'caPem' | 'adminToken'>, plural = 'apidefinitions'): Promise<number> {
  const { status, body } = await call(`${server.url}/metrics`, { token: server.adminToken, ca: server.caPem });
  if (status !== 200) throw new Error(`GET /metrics: ${status}`);
  const labels = ['code="200"', `resource="${plural}"`, 'subresource="status"', 'verb="PUT"'];
  return body
    .split('\n')
    .filter((line) => line.startsWith('apiserver_request_total{') && labels.every((label) => line.includes(label)))
    .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
}

/** kube-apiserver's own CPU seconds so far (its process_cpu_seconds_total). */
export async function apiServerCpuSeconds(server: Pick<KubeApiServer, 'url' | 'caPem' | 'adminToken'>): Promise<number> {
  const { status, body } = await call(`${server.url}/metrics`, { token: server.adminToken, ca: server.caPem });
  if (status !== 200) throw new Error(`GET /metrics: ${status}`);
  return Number(
    body
      .split('\n')
      .find((line) => line.startsWith('process_cpu_seconds_total '))
      ?.split(' ')[1] ?? Number.NaN,
  );
}

/** Polls `probe` until true; fails at once when the process exits, or at the deadline. */
async function waitReady(child: Child, what: string, probe: () => Promise<boolean>, timeoutMs: number, logs: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no attempt completed';
  for (;;) {
    if (!child.running())
      throw new Error(`${child.name} exited (code ${child.process.exitCode}, signal ${child.process.signalCode}) before ${what}\n${logs()}`);
    try {
      if (await probe()) return;
      last = 'not ready yet';
    } catch (err) {
      last = (err as Error).message;
    }
    if (Date.now() > deadline) throw new Error(`${child.name}: ${what} not reached within ${timeoutMs} ms (${last})\n${logs()}`);
    await delay(100);
  }
}

const portInUse = (output: string): boolean => /address already in use/i.test(output);

export async function startKubeApiServer(options: KubeApiServerOptions = {}): Promise<KubeApiServer> {
  requireKubeTools(['etcd', 'kube-apiserver']);
  const timeoutMs = options.timeoutMs ?? 90_000;
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-kube-'));
  const logs: string[] = [];
  const recentLogs = (n = 60): string => {
    const tail = logs.slice(-n).map((line) => `  ${line}`);
    return `--- last ${tail.length} lines of etcd + kube-apiserver (${dir}) ---\n${tail.join('\n')}`;
  };

  let certs: CertificateFiles | undefined;
  let etcd: Child | undefined;
  let apiserver: Child | undefined;
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      await apiserver?.stop();
      await etcd?.stop();
      await certs?.dispose();
      await rm(dir, { recursive: true, force: true });
    })());

  try {
    certs = await createTestCertificates();
    const caPem = await readFile(certs.caCert, 'utf8');
    const adminToken = randomBytes(32).toString('hex');
    const tokenFile = join(dir, 'tokens.csv');
    // token,user,uid,"group1,group2"
    await writeFile(tokenFile, `${adminToken},${ADMIN_USER},${ADMIN_USER},"system:masters"\n`, { mode: 0o600 });
    // ECDSA P-256: instant to generate, and accepted for ES256 service-account tokens.
    const saKeys = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    const saKey = join(dir, 'sa.key');
    const saPub = join(dir, 'sa.pub');
    await writeFile(saKey, saKeys.privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    await writeFile(saPub, saKeys.publicKey.export({ type: 'spki', format: 'pem' }));
    await mkdir(join(dir, 'apiserver-certs'));

    // etcd: a single member on loopback; fsync off because the data dies with the test anyway.
    let etcdUrl = '';
    for (let attempt = 1; ; attempt++) {
      const [clientPort, peerPort] = await freePorts(2);
      etcdUrl = `http://127.0.0.1:${clientPort}`;
      const peerUrl = `http://127.0.0.1:${peerPort}`;
      etcd = spawnChild(
        'etcd',
        ETCD_BIN,
        [
          '--name=gatehouse-test',
          `--data-dir=${join(dir, 'etcd')}`,
          `--listen-client-urls=${etcdUrl}`,
          `--advertise-client-urls=${etcdUrl}`,
          `--listen-peer-urls=${peerUrl}`,
          `--initial-advertise-peer-urls=${peerUrl}`,
          `--initial-cluster=gatehouse-test=${peerUrl}`,
          '--initial-cluster-state=new',
          '--unsafe-no-fsync',
          '--log-level=warn',
        ],
        logs,
      );
      const current = etcd;
      try {
        await waitReady(
          current,
          `${etcdUrl}/health`,
          async () => {
            const res = await call(`${etcdUrl}/health`, { timeoutMs: 2000 });
            return res.status === 200 && /"health":\s*"true"/.test(res.body);
          },
          timeoutMs,
          recentLogs,
        );
        break;
      } catch (err) {
        await current.stop();
        // Another process took the port between freePort() and etcd's bind: try other ports.
        if (attempt < 3 && portInUse(current.output())) {
          await rm(join(dir, 'etcd'), { recursive: true, force: true });
          continue;
        }
        throw err;
      }
    }

    let port = await freePort();
    const url = (): string => `https://127.0.0.1:${port}`;
    const apiServerArgs = (): string[] => [
      `--etcd-servers=${etcdUrl}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      `--secure-port=${port}`,
      `--cert-dir=${join(dir, 'apiserver-certs')}`,
      `--tls-cert-file=${certs!.serverCert}`,
      `--tls-private-key-file=${certs!.serverKey}`,
      `--token-auth-file=${tokenFile}`,
      '--authorization-mode=RBAC',
      `--service-account-issuer=${SERVICE_ACCOUNT_ISSUER}`,
      `--service-account-key-file=${saPub}`,
      `--service-account-signing-key-file=${saKey}`,
      '--service-cluster-ip-range=10.96.0.0/24',
      // The ServiceAccount admission plugin wants each namespace's `default` ServiceAccount, which
      // only the (absent) controller-manager creates.
      '--disable-admission-plugins=ServiceAccount',
      // The `kubernetes` Service endpoints would point at a loopback address, which Endpoints
      // validation refuses; nothing here needs them.
      '--endpoint-reconciler-type=none',
      '--profiling=false',
      '--v=0',
      ...(options.extraApiServerArgs ?? []),
    ];

    const launchApiServer = async (): Promise<void> => {
      const current = spawnChild('kube-apiserver', KUBE_APISERVER_BIN, apiServerArgs(), logs);
      apiserver = current;
      try {
        await waitReady(
          current,
          `${url()}/readyz`,
          async () => (await call(`${url()}/readyz`, { token: adminToken, ca: caPem, timeoutMs: 5000 })).status === 200,
          timeoutMs,
          recentLogs,
        );
      } catch (err) {
        await current.stop();
        throw err;
      }
    };

    for (let attempt = 1; ; attempt++) {
      try {
        await launchApiServer();
        break;
      } catch (err) {
        if (attempt < 3 && portInUse(apiserver!.output())) {
          port = await freePort();
          continue;
        }
        throw err;
      }
    }
    const apiUrl = url();

    const api = async (method: string, path: string, body?: unknown): Promise<HttpResult> =>
      call(`${apiUrl}${path}`, { method, token: adminToken, ca: caPem, body });

    let kubeconfigs = 0;
    const server: KubeApiServer = {
      url: apiUrl,
      caFile: certs.caCert,
      caPem,
      adminToken,
      dir,
      async writeKubeconfig(token, path, namespace) {
        const file = path ?? join(dir, `kubeconfig-${++kubeconfigs}.yaml`);
        // JSON strings are valid YAML scalars: no quoting mistakes with odd paths or tokens.
        const q = JSON.stringify;
        const yaml = [
          'apiVersion: v1',
          'kind: Config',
          'clusters:',
          '- name: gatehouse-test',
          '  cluster:',
          `    server: ${q(apiUrl)}`,
          `    certificate-authority: ${q(certs!.caCert)}`,
          'users:',
          '- name: gatehouse-test-user',
          '  user:',
          `    token: ${q(token)}`,
          'contexts:',
          '- name: gatehouse-test',
          '  context:',
          '    cluster: gatehouse-test',
          '    user: gatehouse-test-user',
          ...(namespace ? [`    namespace: ${q(namespace)}`] : []),
          'current-context: gatehouse-test',
          '',
        ].join('\n');
        await writeFile(file, yaml, { mode: 0o600 });
        return file;
      },
      async serviceAccountToken(namespace, name, expirationSeconds = 3600) {
        const ns = encodeURIComponent(namespace);
        const sa = encodeURIComponent(name);
        const created = await api('POST', `/api/v1/namespaces/${ns}/serviceaccounts`, {
          apiVersion: 'v1',
          kind: 'ServiceAccount',
          metadata: { name, namespace },
        });
        if (created.status !== 201 && created.status !== 409) {
          throw new Error(`creating ServiceAccount ${namespace}/${name}: HTTP ${created.status} ${created.body}`);
        }
        const res = await api('POST', `/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`, {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenRequest',
          spec: { expirationSeconds },
        });
        if (res.status !== 201) throw new Error(`TokenRequest for ${namespace}/${name}: HTTP ${res.status} ${res.body}`);
        const token = (JSON.parse(res.body) as { status?: { token?: string } }).status?.token;
        if (!token) throw new Error(`TokenRequest for ${namespace}/${name} returned no token: ${res.body}`);
        return token;
      },
      async stopApiServer() {
        await apiserver?.stop();
      },
      pauseApiServer() {
        process.kill(apiserver!.process.pid!, 'SIGSTOP');
      },
      resumeApiServer() {
        process.kill(apiserver!.process.pid!, 'SIGCONT');
      },
      async startApiServer() {
        if (stopping) throw new Error('startApiServer() after stop()');
        if (apiserver?.running()) throw new Error(`kube-apiserver is already running (pid ${apiserver.process.pid})`);
        // Same port on purpose (clients keep their URL); if something took it meanwhile this fails loudly.
        await launchApiServer();
      },
      stop,
      recentLogs,
    };
    return server;
  } catch (err) {
    await stop();
    throw err;
  }
}
