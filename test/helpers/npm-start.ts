/**
 * `npm start` (the real package script, scripts/start.mjs) as a child process, directly or from a
 * short-lived intermediate process, with every output line kept. The services it starts write
 * JSON lines prefixed `[control-plane] ` / `[data-plane] ` (LOG_FORMAT=json), their ports in the
 * "listening" lines; start.mjs says each one's pid as it starts it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { pollUntil } from './poll-until.js';
import { REPO_ROOT, type ExitStatus } from './service-process.js';

export interface StartedService {
  pid: number;
  /** Port per listener name. */
  ports: Record<string, number>;
}

export interface NpmStart {
  /** The process this helper spawned: npm itself, or the intermediate that spawned npm. */
  readonly child: ChildProcess;
  readonly exited: Promise<ExitStatus>;
  /** Every line of output so far, oldest first. */
  lines(): readonly string[];
  /** Called with each line as it arrives (e.g. to check a file the moment it is announced). */
  onLine(listener: (line: string) => void): void;
  /** Waits until both services have logged every listener; their pids and ports. */
  services(timeoutMs?: number): Promise<{ cp: StartedService; dp: StartedService }>;
  /** SIGKILL to whatever is left (the launcher and both services), for cleanup. */
  killAll(): void;
}

export interface NpmStartOptions {
  env: Record<string, string>;
  /** Spawn npm from a separate node process (that tests may SIGKILL) instead of from the test. */
  viaIntermediate?: boolean;
}

const LISTENERS = { 'control-plane': ['admin', 'grpc'], 'data-plane': ['proxy', 'status'] } as const;

/**
 * `--ignore-scripts` skips only npm's prestart (the build, done by the test run already); start is
 * the package's own `node scripts/start.mjs`. npm_* variables of an enclosing `npm test` are left out,
 * so start.mjs sees the npm it was run by, as a user's shell would give it.
 */
export function npmStart(options: NpmStartOptions): NpmStart {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined && !/^npm_/i.test(name)) env[name] = value;
  Object.assign(env, options.env);
  const npmArgs = ['start', '--ignore-scripts'];
  const child = options.viaIntermediate
    ? spawn(
        process.execPath,
        ['-e', `require('node:child_process').spawn('npm', ${JSON.stringify(npmArgs)}, { stdio: 'inherit' }); setInterval(() => {}, 1000);`],
        {
          cwd: REPO_ROOT,
          env,
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      )
    : spawn('npm', npmArgs, { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const kept: string[] = [];
  const listeners: ((line: string) => void)[] = [];
  const found: Record<string, StartedService> = {};
  const see = (line: string): void => {
    kept.push(line);
    const launched = /^\[start\] (control-plane|data-plane) started \(pid (\d+)\)$/.exec(line);
    if (launched) found[launched[1]!] = { pid: Number(launched[2]), ports: {} };
    const tagged = /^\[(control-plane|data-plane)\] (\{.*\})$/.exec(line);
    const service = tagged && found[tagged[1]!];
    if (service) {
      const entry = JSON.parse(tagged[2]!) as { msg?: string; listener?: string; port?: number };
      if (entry.msg === 'listening' && entry.listener && entry.port !== undefined) service.ports[entry.listener] = entry.port;
    }
    for (const listener of listeners) listener(line);
  };
  createInterface({ input: child.stdout! }).on('line', see);
  createInterface({ input: child.stderr! }).on('line', see);
  const exited = new Promise<ExitStatus>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const killAll = (): void => {
    for (const pid of [child.pid, ...Object.values(found).map((s) => s.pid)]) {
      try {
        if (pid && pid > 0) process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  };
  process.once('exit', killAll);

  return {
    child,
    exited,
    lines: () => kept,
    onLine: (listener) => listeners.push(listener),
    services(timeoutMs = 60_000) {
      const complete = (tag: keyof typeof LISTENERS): boolean => LISTENERS[tag].every((name) => found[tag]?.ports[name] !== undefined);
      return pollUntil(
        async () => (complete('control-plane') && complete('data-plane') ? { cp: found['control-plane']!, dp: found['data-plane']! } : undefined),
        {
          what: 'npm start: both services listening',
          timeoutMs,
          details: () => kept.slice(-40).join('\n'),
        },
      );
    },
    killAll,
  };
}

/** True while a process with this pid exists. */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  return true;
}
