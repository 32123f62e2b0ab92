/**
 * The one-node Kubernetes of scripts/test-cluster.sh, as the cluster tests use it: brought up (or
 * reused), the images of scripts/test-images.sh loaded into its containerd, and kubectl, helm and TCP
 * connections run inside its network namespace, the only place where its pods, Services and
 * NodePorts can be reached. A missing part (root, a tool, the images script) is reported by
 * `nodeUnavailable()`: the tests fail on it under CI=true and are skipped, saying why, elsewhere.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants as fsConstants, existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { HELM_BIN } from './helm.js';
import { REPO_ROOT } from './service-process.js';

export const TOOLS_BIN = join(process.env.GATEHOUSE_TOOLS_DIR ?? join(homedir(), '.cache', 'gatehouse', 'tools'), 'bin');
export const KUBECTL_BIN = join(TOOLS_BIN, 'kubectl');
export const CLUSTER_SCRIPT = join(REPO_ROOT, 'scripts', 'test-cluster.sh');
export const IMAGES_SCRIPT = process.env.GATEHOUSE_TEST_IMAGES_SCRIPT ?? join(REPO_ROOT, 'scripts', 'test-images.sh');
export const NODE_NETNS = '/var/run/netns/gatehouse-node';
/** The node's address inside its namespace (NodePorts listen there). */
export const NODE_IP = '10.250.0.10';

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  input?: string;
  env?: Record<string, string>;
  timeoutMs?: number;
}

/** Runs a command; never throws on a non-zero exit. */
export function run(command: string, args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      command,
      [...args],
      { env: { ...process.env, ...options.env }, cwd: REPO_ROOT, timeout: options.timeoutMs ?? 120_000, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err && typeof (err as NodeJS.ErrnoException).code === 'string') {
          reject(new Error(`${command} ${args.join(' ')}: ${err.message}`));
          return;
        }
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
      },
    );
    if (options.input !== undefined) child.stdin?.end(options.input);
  });
}

/** Why the node cannot run here, or undefined when everything it needs is present. */
export function nodeUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'the test node needs root (network namespaces, containerd, kubelet)';
  for (const bin of ['kubelet', 'kube-apiserver', 'kubectl', 'coredns', 'pause', 'metrics-server']) {
    try {
      accessSync(join(TOOLS_BIN, bin), fsConstants.X_OK);
    } catch {
      return `${join(TOOLS_BIN, bin)} is missing: run bash scripts/test-tools.sh`;
    }
  }
  if (!existsSync(IMAGES_SCRIPT)) return `${IMAGES_SCRIPT} is missing (it builds the images the pods run)`;
  for (const bin of ['/usr/bin/containerd', '/usr/sbin/runc', '/usr/lib/cni/bridge']) {
    if (!existsSync(bin)) return `${bin} is missing: apt-get install containerd runc containernetworking-plugins`;
  }
  return undefined;
}

export interface TestNode {
  kubeconfig: string;
  containerd: string;
  gatehouseImage: string;
  upstreamImage: string;
}

let node: Promise<TestNode> | undefined;

/** `test-cluster.sh up` (reuses a node that is up), then the images loaded; once per test file. */
export function testNode(): Promise<TestNode> {
  node ??= (async () => {
    const up = await run('bash', [CLUSTER_SCRIPT, 'up'], { timeoutMs: 300_000 });
    if (up.code !== 0) throw new Error(`test-cluster.sh up failed:\n${up.stdout}\n${up.stderr}`);
    const field = (name: string): string => {
      const value = new RegExp(`^${name}: (.*)$`, 'm').exec(up.stdout)?.[1];
      if (!value) throw new Error(`test-cluster.sh up printed no ${name}:\n${up.stdout}`);
      return value;
    };
    const containerd = field('containerd');
    const load = await run('bash', [IMAGES_SCRIPT, 'load', containerd], { timeoutMs: 1_200_000 });
    if (load.code !== 0) throw new Error(`test-images.sh load failed:\n${load.stdout}\n${load.stderr}`);
    const names = await run('bash', [IMAGES_SCRIPT, 'names']);
    const image = (name: string): string => {
      const value = new RegExp(`^${name}=(.*)$`, 'm').exec(names.stdout)?.[1];
      if (!value) throw new Error(`test-images.sh names printed no ${name}:\n${names.stdout}`);
      return value;
    };
    return { kubeconfig: field('kubeconfig'), containerd, gatehouseImage: image('GATEHOUSE_IMAGE'), upstreamImage: image('UPSTREAM_IMAGE') };
  })();
  return node;
}

/** Runs a command inside the node's network namespace (same mounts, same files). */
export function inNode(command: string, args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  return run('nsenter', [`--net=${NODE_NETNS}`, '--', command, ...args], options);
}

export async function kubectl(args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  const { kubeconfig } = await testNode();
  return inNode(KUBECTL_BIN, ['--kubeconfig', kubeconfig, ...args], options);
}

/** kubectl that must succeed; returns its stdout. */
export async function kubectlOk(args: readonly string[], options: RunOptions = {}): Promise<string> {
  const result = await kubectl(args, options);
  if (result.code !== 0) throw new Error(`kubectl ${args.join(' ')} exited ${result.code}: ${result.stderr}`);
  return result.stdout;
}

export async function helm(args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  const { kubeconfig } = await testNode();
  // A private state per run: no user repositories, plugins or cache leak in.
  return inNode(HELM_BIN, args, {
    ...options,
    env: {
      KUBECONFIG: kubeconfig,
      HELM_CACHE_HOME: join(tmpdir(), 'gatehouse-helm-cache'),
      HELM_CONFIG_HOME: join(tmpdir(), 'gatehouse-helm-config'),
      HELM_DATA_HOME: join(tmpdir(), 'gatehouse-helm-data'),
      ...options.env,
    },
  });
}

export interface NodeForward {
  /** A Unix socket in the file system: each connection to it is a TCP connection made inside the node's namespace. */
  socketPath: string;
  close(): Promise<void>;
}

// The forwarder: one TCP connection inside the namespace per connection to the socket. An end (FIN)
// is passed on after the data before it (pipe), an error (RST) as a destroy.
const FORWARDER = `
const net = require('node:net');
const [host, port, path] = process.argv.slice(1);
const server = net.createServer((client) => {
  const upstream = net.connect(Number(port), host);
  client.pipe(upstream);
  upstream.pipe(client);
  client.on('error', () => upstream.destroy());
  upstream.on('error', () => client.destroy());
});
server.listen(path, () => console.log('listening'));
process.stdin.on('end', () => process.exit(0)).resume();
`;

/**
 * Reaches host:port as seen from inside the node (a ClusterIP, a Service name needs DNS and is not
 * resolved here, a NodePort on NODE_IP) from the test process: http requests and load go to `socketPath`.
 */
export async function forwardIntoNode(host: string, port: number): Promise<NodeForward> {
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-node-fwd-'));
  const socketPath = join(dir, 'socket');
  const child: ChildProcess = spawn('nsenter', [`--net=${NODE_NETNS}`, '--', process.execPath, '-e', FORWARDER, host, String(port), socketPath], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`forwarder to ${host}:${port} exited ${code}`)));
    child.stdout?.once('data', () => resolve());
  });
  return {
    socketPath,
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return rm(dir, { recursive: true, force: true });
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.stdin?.end();
      await exited;
      await rm(dir, { recursive: true, force: true });
    },
  };
}
