// npm prestart: compile (tsc -b) when a service's dist/main.js is missing or older than any
// source it is built from, so `npm install && npm start` works on a fresh clone.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const entryPoints = ['control-plane/dist/main.js', 'data-plane/dist/main.js'].map((p) => join(root, p));
// tsc -b rewrites a project's .tsbuildinfo on every build of it, even when main.js is unchanged.
const buildInfos = ['proto', 'control-plane', 'data-plane'].map((p) => join(root, p, 'dist', '.tsbuildinfo'));
const sources = ['proto/src', 'proto/gatehouse', 'control-plane/src', 'data-plane/src'].map((p) => join(root, p));

function newestMtime(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(path));
    else if (!entry.name.endsWith('.test.ts')) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

const built = entryPoints.every((p) => existsSync(p));
const oldestBuild = Math.min(...buildInfos.map((p) => (existsSync(p) ? statSync(p).mtimeMs : 0)));
const newestSource = Math.max(...sources.filter((d) => existsSync(d)).map(newestMtime));
if (built && oldestBuild >= newestSource) process.exit(0);

console.log('gatehouse: building (tsc -b)…');
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
const result = spawnSync(process.execPath, [tsc, '-b'], { cwd: root, stdio: 'inherit' });
process.exit(result.status ?? 1);
