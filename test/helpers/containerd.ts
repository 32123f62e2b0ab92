/**
 * A private containerd (its own root, state and socket in a temporary directory; no CRI plugin) as a
 * child process, and `ctr` against it in the kubelet's namespace (k8s.io): for tests that import the
 * test images and run containers from them with runc, as a node's containerd would. stop() kills and
 * removes every container, stops containerd and leaves no process, mount or directory behind.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pollUntil } from './poll-until.js';

const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((path) => existsSync(path));

export interface CtrResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface Containerd {
  /** The gRPC socket (what `ctr --address` and `test-images.sh load` take). */
  readonly address: string;
  readonly dir: string;
  /** `ctr --address <socket> -n k8s.io <args>`; never throws on a non-zero exit. */
  ctr(args: readonly string[], timeoutMs?: number): Promise<CtrResult>;
  /** Like ctr(), but a non-zero exit throws with ctr's stderr. */
  ctrOk(args: readonly string[], timeoutMs?: number): Promise<string>;
  /** containerd's last log lines, for failure messages. */
  logs(): string;
  stop(): Promise<void>;
}

export function missingContainerdTools(): string[] {
  const onPath = (tool: string) => (process.env.PATH ?? '').split(':').some((dir) => dir && existsSync(join(dir, tool)));
  return ['containerd', 'ctr', 'runc'].filter((tool) => !onPath(tool));
}

function run(command: string, args: readonly string[], timeoutMs: number): Promise<CtrResult> {
  return new Promise((resolve, reject) => {
    execFile(command, [...args], { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err && typeof (err as NodeJS.ErrnoException).code === 'string') {
        reject(new Error(`${command} ${args.join(' ')}: ${err.message}`));
        return;
      }
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

export async function startContainerd(): Promise<Containerd> {
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-containerd-'));
  const address = join(dir, 'containerd.sock');
  await writeFile(
    join(dir, 'config.toml'),
    [
      'version = 2',
      `root = "${dir}/root"`,
      `state = "${dir}/state"`,
      'disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]',
      '[grpc]',
      `  address = "${address}"`,
      '[ttrpc]',
      `  address = "${address}.ttrpc"`,
      '[plugins."io.containerd.internal.v1.opt"]',
      `  path = "${dir}/opt"`,
      '',
    ].join('\n'),
  );
  const argv = ['--config', join(dir, 'config.toml')];
  const [command, args] = SETPRIV ? [SETPRIV, ['--pdeathsig', 'KILL', '--', 'containerd', ...argv]] : ['containerd', argv];
  const child: ChildProcess = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const lines: string[] = [];
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    lines.push(...chunk.split('\n').filter(Boolean));
    if (lines.length > 200) lines.splice(0, lines.length - 200);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const killOnExit = (): void => void child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const logs = () => lines.slice(-40).join('\n');

  const ctr = (ctrArgs: readonly string[], timeoutMs = 120_000) => run('ctr', ['--address', address, '-n', 'k8s.io', ...ctrArgs], timeoutMs);
  const ctrOk = async (ctrArgs: readonly string[], timeoutMs?: number) => {
    const result = await ctr(ctrArgs, timeoutMs);
    if (result.code !== 0) throw new Error(`ctr ${ctrArgs.join(' ')} exited with ${result.code}: ${result.stderr}${result.stdout}`);
    return result.stdout;
  };

  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      // Tasks first: their shims and runc's cgroups go with them.
      const tasks = (await ctr(['tasks', 'ls', '-q'])).stdout.split('\n').filter(Boolean);
      for (const id of tasks) {
        await ctr(['tasks', 'kill', '--signal', 'SIGKILL', id]);
        await pollUntil(async () => ((await ctr(['tasks', 'ls'])).stdout.match(new RegExp(`^${id}\\s+\\d+\\s+RUNNING`, 'm')) ? undefined : true), {
          what: `task ${id} to stop`,
          timeoutMs: 10_000,
        }).catch(() => undefined);
        await ctr(['tasks', 'rm', '--force', id]);
      }
      for (const id of (await ctr(['containers', 'ls', '-q'])).stdout.split('\n').filter(Boolean)) await ctr(['containers', 'rm', id]);
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    process.removeListener('exit', killOnExit);
    // Whatever is still mounted under the directory (a task that would not go), deepest first.
    const mounts = (await readFile('/proc/self/mountinfo', 'utf8'))
      .split('\n')
      .map((line) => line.split(' ')[4])
      .filter((target) => target?.startsWith(`${dir}/`))
      .sort()
      .reverse();
    for (const target of mounts) await run('umount', ['-l', target], 10_000);
    await rm(dir, { recursive: true, force: true });
  };

  try {
    await pollUntil(async () => ((await run('ctr', ['--address', address, 'version'], 5_000)).code === 0 ? true : undefined), {
      what: `containerd to serve on ${address}`,
      timeoutMs: 30_000,
      details: logs,
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return { address, dir, ctr, ctrOk, logs, stop };
}
