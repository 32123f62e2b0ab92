/**
 * A real redis-server (Debian package `redis-server`) on a free loopback port, without persistence,
 * as a child process owned by the test. Missing binary = a loud failure, never a silent skip.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { freePort } from './free-port.js';

export interface RedisServer {
  port: number;
  url: string;
  /** SIGTERM (SIGKILL after 5 s) and wait for the exit. Idempotent. */
  stop(): Promise<void>;
}

export const REDIS_SERVER_BIN = process.env.REDIS_SERVER_BIN ?? 'redis-server';

export function redisServerAvailable(): boolean {
  const probe = spawnSync(REDIS_SERVER_BIN, ['--version'], { stdio: 'ignore' });
  return probe.status === 0;
}

/** Throws with install instructions when redis-server is missing (in CI and elsewhere alike). */
export function requireRedisServer(): void {
  if (!redisServerAvailable()) {
    throw new Error(
      `redis-server not found (${REDIS_SERVER_BIN}${process.env.CI === 'true' ? ', CI=true' : ''}): ` +
        'install it with `apt-get install -y redis-server` (.ci/run does this)',
    );
  }
}

export async function startRedisServer(options: { port?: number; timeoutMs?: number } = {}): Promise<RedisServer> {
  requireRedisServer();
  const port = options.port ?? (await freePort());
  const child = spawn(
    REDIS_SERVER_BIN,
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--protected-mode', 'yes'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`redis-server did not start on ${port}:\n${output}`)), options.timeoutMs ?? 10_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Ready to accept connections')) done();
    };
    const onExit = (code: number | null) => fail(new Error(`redis-server exited with ${code}:\n${output}`));
    function cleanup() {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.off('exit', onExit);
    }
    function done() {
      cleanup();
      resolve();
    }
    function fail(err: Error) {
      cleanup();
      child.kill('SIGKILL');
      reject(err);
    }
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (c: Buffer) => (output += c.toString()));
    child.once('exit', onExit);
  });
  child.stdout?.resume();
  child.stderr?.resume();
  return { port, url: `redis://127.0.0.1:${port}`, stop: () => stopChild(child, exited) };
}

async function stopChild(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}
