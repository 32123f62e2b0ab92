/**
 * A built Gatehouse service (control plane or data plane) run as a real child process.
 * Ports are learned from the pino "listening" lines (process contract); stdout and stderr are
 * kept (last lines) so that every failed wait can show what the process said.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

const KEPT_LINES = 300;

export interface LogLine {
  /** Parsed pino line, or undefined for a line that is not JSON. */
  json: Record<string, unknown> | undefined;
  raw: string;
}

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ServiceProcess {
  readonly name: string;
  readonly pid: number;
  /** Port per listener name, from the "listening" lines. */
  readonly ports: Readonly<Record<string, number>>;
  readonly exited: Promise<ExitStatus>;
  /** True until the process has exited. */
  running(): boolean;
  /** The last `n` lines of stdout+stderr, for failure messages. */
  recentLogs(n?: number): string;
  /** Every kept line (parsed), oldest first. */
  lines(): readonly LogLine[];
  /** SIGTERM, then the exit status (never waits more than `timeoutMs`; SIGKILLs after). */
  stop(timeoutMs?: number): Promise<ExitStatus>;
  /** SIGKILL, then the exit status. */
  kill(): Promise<ExitStatus>;
}

export interface SpawnServiceOptions {
  name: string;
  /** Path relative to the repository root, e.g. `control-plane/bundle/main.js`, run by this node. */
  script?: string;
  /** Instead of `script`: any program and its arguments (the benchmarks' nginx, `node -e …`); `nodeFlags` do not apply. */
  command?: { file: string; args: readonly string[] };
  /** node's own flags, before the script (e.g. the chart's `--max-semi-space-size=8`). */
  nodeFlags?: readonly string[];
  env: Record<string, string>;
  /** Listener names whose "listening" lines must appear before the promise resolves. */
  listeners: readonly string[];
  startTimeoutMs?: number;
  /** Sees every line of stdout and stderr as it comes (lines() keeps only the last 300). */
  onLine?: (raw: string) => void;
}

export async function spawnService(options: SpawnServiceOptions): Promise<ServiceProcess> {
  const { name, script, command, nodeFlags = [], env, listeners, startTimeoutMs = 15_000 } = options;
  if ((script === undefined) === (command === undefined)) throw new Error(`${name}: give either script or command`);
  const [file, args] = command ? [command.file, command.args] : [process.execPath, [...nodeFlags, script!]];
  const child: ChildProcess = spawn(file, args, {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const kept: LogLine[] = [];
  const ports: Record<string, number> = {};
  const waiting = new Set(listeners);
  let onListening: (() => void) | undefined;

  const keep = (raw: string): void => {
    options.onLine?.(raw);
    let json: Record<string, unknown> | undefined;
    try {
      const parsed: unknown = JSON.parse(raw);
      if (parsed && typeof parsed === 'object') json = parsed as Record<string, unknown>;
    } catch {
      json = undefined;
    }
    kept.push({ json, raw });
    if (kept.length > KEPT_LINES) kept.shift();
    if (json?.msg === 'listening' && typeof json.listener === 'string' && typeof json.port === 'number') {
      ports[json.listener] = json.port;
      waiting.delete(json.listener);
      if (waiting.size === 0) onListening?.();
    }
  };
  createInterface({ input: child.stdout! }).on('line', keep);
  createInterface({ input: child.stderr! }).on('line', (line) => keep(`[stderr] ${line}`));

  // A crashed or killed test worker must not leave services behind holding ports.
  const killOnExit = (): void => {
    child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);
  const exited = new Promise<ExitStatus>((resolve) => {
    child.once('exit', (code, signal) => {
      process.removeListener('exit', killOnExit);
      resolve({ code, signal });
    });
  });

  const recentLogs = (n = 40): string => {
    const tail = kept.slice(-n).map((line) => `  ${line.raw}`);
    return `--- last ${tail.length} log lines of ${name} (pid ${child.pid}) ---\n${tail.join('\n')}`;
  };

  const handle: ServiceProcess = {
    name,
    pid: child.pid ?? -1,
    ports,
    exited,
    running: () => child.exitCode === null && child.signalCode === null,
    recentLogs,
    lines: () => kept,
    async stop(timeoutMs = 15_000) {
      if (handle.running()) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      const status = await exited;
      clearTimeout(timer);
      return status;
    },
    async kill() {
      if (handle.running()) child.kill('SIGKILL');
      return exited;
    },
  };

  if (waiting.size > 0) {
    let timer: NodeJS.Timeout | undefined;
    // Once the start-up race is settled, a later exit must not become an unhandled rejection.
    let settled = false;
    try {
      await Promise.race([
        new Promise<void>((resolve) => {
          onListening = resolve;
        }),
        exited.then((status) => {
          if (settled) return;
          throw new Error(`${name} exited (code ${status.code}, signal ${status.signal}) before listening on ${[...waiting].join(', ')}\n${recentLogs()}`);
        }),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`${name} did not log "listening" for ${[...waiting].join(', ')} within ${startTimeoutMs} ms\n${recentLogs()}`)),
            startTimeoutMs,
          );
        }),
      ]);
    } catch (err) {
      settled = true;
      await handle.kill();
      throw err;
    } finally {
      settled = true;
      clearTimeout(timer);
    }
  }
  return handle;
}
