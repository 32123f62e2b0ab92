// The environment the image gives every process (deploy/Dockerfile's final stage, its `ENV name=value`
// lines), so that what the benchmarks start runs as the image runs it (docs/benchmarks.md). A variable already
// set in this process's environment keeps its value (`GLIBC_TUNABLES= npm run bench`: glibc's defaults).
//   node scripts/image-env.mjs      prints name=value lines (for the shell scripts: `export $(node scripts/image-env.mjs)`)
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const root = resolve(import.meta.dirname, '..');

/** name → value of the final stage's ENV lines (one `name=value` each, as the Dockerfile writes them), process.env's first. */
export function imageEnv(dockerfile = readFileSync(join(root, 'deploy/Dockerfile'), 'utf8')) {
  const lines = dockerfile.split('\n');
  const finalStage = lines.slice(lines.findLastIndex((line) => /^FROM\s/i.test(line)));
  const env = {};
  for (const line of finalStage) {
    const m = /^ENV\s+([A-Za-z_][A-Za-z0-9_]*)=(\S+)\s*$/.exec(line);
    if (m) env[m[1]] = process.env[m[1]] ?? m[2];
    else if (/^ENV\s/.test(line)) throw new Error(`deploy/Dockerfile: an ENV line this script does not read (one name=value each): ${line}`);
  }
  return env;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  for (const [name, value] of Object.entries(imageEnv())) console.log(`${name}=${value}`);
}
