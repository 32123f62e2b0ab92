// npm start: one control plane and one data plane on loopback with the embedded file store. The data
// plane presents the join token the control plane generated into DATA_DIR (unless GRPC_JOIN_TOKEN is set).
// Output of both is prefixed and forwarded (LOG_FORMAT=pretty unless set to json); SIGINT, SIGTERM
// and SIGHUP become a SIGTERM to both, and so does the death of the process that started us;
// exits when both have.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { logFormatOf, prettyLogLine } from '../proto/dist/logger.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const env = process.env;
const dataDir = resolve(root, env.DATA_DIR ?? 'data');

let logFormat;
try {
  logFormat = logFormatOf({ LOG_FORMAT: env.LOG_FORMAT ?? 'pretty' });
} catch (err) {
  console.error(`[start] ${err.message}`);
  process.exit(1);
}
// The services always write JSON to us: their "listening" lines are read here, then shown as asked.
const pretty = logFormat === 'pretty' ? prettyLogLine(process.stdout.isTTY) : null;
const show = (line) => {
  if (!pretty || !line.startsWith('{')) return line;
  try {
    return pretty(line).trimEnd();
  } catch {
    return line;
  }
};
// A reader that went away (a closed terminal, a dead pipe) must not crash us and orphan the services.
process.stdout.on('error', () => undefined);
process.stderr.on('error', () => undefined);

const children = new Map();
let stopping = false;
let exitCode = 0;

/** `script`: the entry point, or node's arguments ending with it. */
function run(tag, script, extraEnv, onLine) {
  const child = spawn(process.execPath, [script].flat(), {
    cwd: root,
    env: { ...env, ...extraEnv, LOG_FORMAT: 'json' },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Own process group: Ctrl-C reaches only this script, which turns it into a graceful SIGTERM.
    detached: true,
  });
  children.set(tag, child);
  console.log(`[start] ${tag} started (pid ${child.pid})`);
  for (const [stream, out] of [
    [child.stdout, process.stdout],
    [child.stderr, process.stderr],
  ]) {
    createInterface({ input: stream }).on('line', (line) => {
      out.write(`[${tag}] ${show(line)}\n`);
      onLine?.(line);
    });
  }
  child.on('exit', (code, signal) => {
    children.delete(tag);
    console.log(`[start] ${tag} exited (${signal ?? `code ${code}`})`);
    if (code !== 0) exitCode = 1;
    // One service gone on its own: stop the other too rather than run half a gateway.
    if (!stopping) shutdown();
    if (children.size === 0) process.exit(exitCode);
  });
  return child;
}

function shutdown() {
  stopping = true;
  for (const child of children.values()) child.kill('SIGTERM');
}
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);
process.on('SIGHUP', shutdown);

/** Linux: `{ ppid, zombie }` of a process from /proc, or null when it is gone (or /proc is unreadable). */
function processState(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) state ppid …": comm may hold spaces and parentheses, so read after the last ')'.
    const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(ppid), zombie: state === 'Z' || state === 'X' };
  } catch {
    return null;
  }
}

/** True for npm's script shell (and nested scripts): npm puts npm_lifecycle_event in their environment. */
function isNpmScript(pid) {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .some((entry) => entry.startsWith('npm_lifecycle_event='));
  } catch {
    return false;
  }
}

/**
 * The processes whose death ends ours, each with the parent it has now: our parent and, when that
 * is npm's script shell, every process up to npm itself. So `kill -9` of whatever ran `npm start`
 * (its parent changes: npm is re-parented) stops the services too instead of leaving them on the ports.
 */
function launchers() {
  const chain = [];
  let pid = process.ppid;
  for (let depth = 0; depth < 8 && pid > 1; depth++) {
    const state = processState(pid);
    if (!state) break;
    chain.push({ pid, ppid: state.ppid });
    // Stop at npm: the first process that is not a script shell, or the script shell's parent.
    if (!isNpmScript(pid) || chain.length === 2) break;
    pid = state.ppid;
  }
  return chain;
}

const initialParent = process.ppid;
const watched = launchers();
const PARENT_CHECK_MS = 500;
const parentWatch = setInterval(() => {
  const gone =
    process.ppid !== initialParent ||
    watched.some(({ pid, ppid }) => {
      const state = processState(pid);
      return state === null || state.zombie || state.ppid !== ppid;
    });
  if (gone && !stopping) {
    console.log('[start] the process that started gatehouse is gone: stopping');
    clearInterval(parentWatch);
    shutdown();
  }
}, PARENT_CHECK_MS);
parentWatch.unref();

function listening(line) {
  try {
    const entry = JSON.parse(line);
    return entry.msg === 'listening' ? entry : undefined;
  } catch {
    return undefined;
  }
}

/** Said once the CP listens, so the password file it names exists by then (it is written before the admin port opens). */
function announceCredentials() {
  const user = env.ADMIN_USER ?? 'admin';
  const passwordFile = resolve(dataDir, 'admin-password');
  if (env.ADMIN_PASSWORD) console.log(`[start] admin credentials: ${user} / (ADMIN_PASSWORD from the environment)`);
  else if (existsSync(passwordFile)) console.log(`[start] admin credentials: ${user} / password in ${passwordFile}`);
}

let dataPlaneStarted = false;
run(
  'control-plane',
  'control-plane/dist/main.js',
  { ADMIN_HOST: env.ADMIN_HOST ?? '127.0.0.1', GRPC_HOST: env.GRPC_HOST ?? '127.0.0.1', DATA_DIR: dataDir },
  (line) => {
    const entry = listening(line);
    if (entry?.listener === 'admin') {
      console.log(`[start] admin API: http://127.0.0.1:${entry.port}`);
      announceCredentials();
    }
    // The DP starts once the CP's gRPC port is known (GRPC_PORT may be 0), and its generated join token written.
    if (entry?.listener === 'grpc' && !dataPlaneStarted && !stopping) {
      dataPlaneStarted = true;
      const joinToken = entry.joinTokenFile ? { GRPC_JOIN_TOKEN: readFileSync(entry.joinTokenFile, 'utf8').trim() } : {};
      if (entry.joinTokenFile) console.log(`[start] data plane join token: in ${entry.joinTokenFile}`);
      run(
        'data-plane',
        // As the Helm chart runs it (docs/benchmarks.md, data plane memory).
        ['--max-semi-space-size=8', 'data-plane/dist/main.js'],
        {
          PROXY_HOST: env.PROXY_HOST ?? '127.0.0.1',
          STATUS_HOST: env.STATUS_HOST ?? '127.0.0.1',
          CONTROL_PLANE_ADDR: env.CONTROL_PLANE_ADDR ?? `127.0.0.1:${entry.port}`,
          ...joinToken,
        },
        (dpLine) => {
          const dpEntry = listening(dpLine);
          if (dpEntry?.listener === 'proxy') console.log(`[start] gateway: http://127.0.0.1:${dpEntry.port}`);
          if (dpEntry?.listener === 'status') console.log(`[start] data plane status: http://127.0.0.1:${dpEntry.port}/readyz`);
        },
      );
    }
  },
);
