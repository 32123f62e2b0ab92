// npm start: one control plane and one data plane on loopback with the embedded file store.
// Output of both is prefixed and forwarded; SIGINT/SIGTERM become a SIGTERM to both; exits when both have.
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const env = process.env;
const dataDir = resolve(root, env.DATA_DIR ?? 'data');

const children = new Map();
let stopping = false;
let exitCode = 0;

function run(tag, script, extraEnv, onLine) {
  const child = spawn(process.execPath, [script], {
    cwd: root,
    env: { ...env, ...extraEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Own process group: Ctrl-C reaches only this script, which turns it into a graceful SIGTERM.
    detached: true,
  });
  children.set(tag, child);
  for (const [stream, out] of [
    [child.stdout, process.stdout],
    [child.stderr, process.stderr],
  ]) {
    createInterface({ input: stream }).on('line', (line) => {
      out.write(`[${tag}] ${line}\n`);
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

function listening(line) {
  try {
    const entry = JSON.parse(line);
    return entry.msg === 'listening' ? entry : undefined;
  } catch {
    return undefined;
  }
}

let dataPlaneStarted = false;
run(
  'control-plane',
  'control-plane/dist/main.js',
  { ADMIN_HOST: env.ADMIN_HOST ?? '127.0.0.1', GRPC_HOST: env.GRPC_HOST ?? '127.0.0.1', DATA_DIR: dataDir },
  (line) => {
    const entry = listening(line);
    if (entry?.listener === 'admin') console.log(`[start] admin API: http://127.0.0.1:${entry.port}`);
    // The DP starts once the CP's gRPC port is known (GRPC_PORT may be 0).
    if (entry?.listener === 'grpc' && !dataPlaneStarted && !stopping) {
      dataPlaneStarted = true;
      run(
        'data-plane',
        'data-plane/dist/main.js',
        {
          PROXY_HOST: env.PROXY_HOST ?? '127.0.0.1',
          STATUS_HOST: env.STATUS_HOST ?? '127.0.0.1',
          CONTROL_PLANE_ADDR: env.CONTROL_PLANE_ADDR ?? `127.0.0.1:${entry.port}`,
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

if (env.ADMIN_PASSWORD) {
  console.log(`[start] admin credentials: ${env.ADMIN_USER ?? 'admin'} / (ADMIN_PASSWORD from the environment)`);
} else {
  console.log(`[start] admin credentials: ${env.ADMIN_USER ?? 'admin'} / password in ${resolve(dataDir, 'admin-password')}`);
}
