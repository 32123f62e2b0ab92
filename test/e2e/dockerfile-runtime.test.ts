/**
 * What the image built from deploy/Dockerfile holds, and what its build context lets in, checked
 * without a container engine. The final stage's filesystem is assembled in a temporary directory
 * from its own COPY lines (the build stage's output = this checkout after `npm run build`; the deps
 * stage = its COPY lines plus its `npm ci --omit=dev`, run for real from package-lock.json): it holds
 * production dependencies only. .dockerignore keeps in what the build stage copies and keeps out
 * node_modules, dist, tests. The image itself is built and run in test/image/dockerfile-build.test.ts.
 */
import { execFile } from 'node:child_process';
import { cp as copy, mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { dockerignore, last, readDockerfile, type Dockerfile, type Stage } from '../helpers/dockerfile.js';
import { REPO_ROOT } from '../helpers/service-process.js';

const run = promisify(execFile);
const T = 180_000;

let dockerfile: Dockerfile;
let workdir: string;

/** `/app/x` → `x` (paths inside the build stages, whose WORKDIR is /app). */
function stagePath(stage: Stage, path: string): string {
  const dir = last(stage, 'WORKDIR')?.args[0] ?? '/';
  const prefix = dir.endsWith('/') ? dir : `${dir}/`;
  if (!path.startsWith(prefix)) throw new Error(`COPY source ${path} is outside the stage's WORKDIR ${dir}`);
  return path.slice(prefix.length);
}

/** Runs a stage's context COPY lines and its `npm ci` commands in `dir` (the deps stage). */
async function emulateDepsStage(stage: Stage, dir: string): Promise<void> {
  for (const i of stage.instructions) {
    if (i.keyword === 'COPY') {
      if (i.flags.from) throw new Error(`deps stage copies from stage ${i.flags.from}; the emulation handles context copies only`);
      for (const src of i.args.slice(0, -1)) await copy(join(REPO_ROOT, src), join(dir, src), { recursive: true });
    } else if (i.keyword === 'RUN') {
      // `npm cache clean --force` would wipe this machine's npm cache; it only shrinks the layer.
      for (const command of i.text.split('&&').map((c) => c.trim())) {
        if (/^npm cache clean/.test(command)) continue;
        if (!/^npm ci( |$)/.test(command)) throw new Error(`deps stage RUN ${command}: not emulated`);
        const argv = command.split(/\s+/).slice(1);
        await run('npm', argv, { cwd: dir, env: { ...process.env, npm_config_prefer_offline: 'true' }, maxBuffer: 16 * 1024 * 1024 });
      }
    }
  }
}

beforeAll(async () => {
  dockerfile = await readDockerfile(join(REPO_ROOT, 'deploy/Dockerfile'));
  workdir = await mkdtemp(join(tmpdir(), 'gatehouse-image-'));
  for (const output of ['control-plane/bundle/main.js', 'data-plane/bundle/main.js']) {
    await stat(join(REPO_ROOT, output)).catch(() => {
      throw new Error(`${output} is missing: run npm run build first`);
    });
  }
  // The final stage's COPY lines, in order.
  let deps: string | undefined;
  for (const i of dockerfile.final.instructions.filter((x) => x.keyword === 'COPY')) {
    const [dest, ...srcs] = [i.args[i.args.length - 1], ...i.args.slice(0, -1)];
    for (const src of srcs) {
      let from: string;
      if (i.flags.from === 'build') from = join(REPO_ROOT, stagePath(dockerfile.stage('build'), src));
      else if (i.flags.from === 'deps') {
        deps ??= await mkdtemp(join(tmpdir(), 'gatehouse-deps-'));
        if (!(await readdir(deps)).length) await emulateDepsStage(dockerfile.stage('deps'), deps);
        from = join(deps, stagePath(dockerfile.stage('deps'), src));
      } else if (i.flags.from) throw new Error(`COPY --from=${i.flags.from} is not emulated`);
      else from = join(REPO_ROOT, src);
      const target = dest.endsWith('/') ? join(workdir, dest, src.split('/').pop()!) : join(workdir, dest);
      await copy(from, target, { recursive: true });
    }
  }
  if (deps) await rm(deps, { recursive: true, force: true });
}, T);

afterAll(async () => {
  if (workdir) await rm(workdir, { recursive: true, force: true });
}, T);

test(
  'the image holds production dependencies only',
  async () => {
    const pkg = JSON.parse(await readFile(join(REPO_ROOT, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    const lock = JSON.parse(await readFile(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
    const present = async (path: string) =>
      stat(join(workdir, path)).then(
        () => true,
        () => false,
      );
    for (const name of Object.keys(pkg.dependencies)) expect({ name, present: await present(`node_modules/${name}`) }).toEqual({ name, present: true });
    // Every package the lock file marks dev-only (jest, typescript, ts-jest, tsx, autocannon and what only
    // they pull in) is absent; a devDependency that a production package also needs (@types/node) stays.
    const devOnly = Object.entries(lock.packages)
      .filter(([path, entry]) => path.startsWith('node_modules/') && entry.dev === true)
      .map(([path]) => path);
    expect(devOnly.length).toBeGreaterThan(50);
    for (const name of ['jest', 'typescript', 'ts-jest', 'tsx', 'autocannon']) expect(devOnly).toContain(`node_modules/${name}`);
    const installedDevOnly = [];
    for (const path of devOnly) if (await present(path)) installedDevOnly.push(path);
    expect(installedDevOnly).toEqual([]);
    expect((await readdir(workdir)).sort()).toEqual(['control-plane', 'data-plane', 'node_modules', 'package.json', 'proto']);
  },
  T,
);

test(
  '.dockerignore: the build stage’s context copies are kept in; node_modules, dist, tests and the rest are kept out',
  async () => {
    const excluded = dockerignore(await readFile(join(REPO_ROOT, '.dockerignore'), 'utf8'));
    const contextSources = dockerfile.stages
      .flatMap((s) => s.instructions)
      .filter((i) => i.keyword === 'COPY' && !i.flags.from)
      .flatMap((i) => i.args.slice(0, -1));
    const needed = [
      ...contextSources,
      'proto/src/grpc.ts',
      'proto/gatehouse/v1/gatehouse.proto',
      'proto/tsconfig.json',
      'control-plane/src/main.ts',
      'control-plane/console/index.html',
      'control-plane/console/js/main.js',
      'control-plane/tsconfig.json',
      'data-plane/src/main.ts',
      'data-plane/tsconfig.json',
      'scripts/bundle.mjs',
    ];
    for (const path of needed) expect({ path, excluded: excluded(path) }).toEqual({ path, excluded: false });
    for (const path of [
      'node_modules/jest/package.json',
      'proto/dist/grpc.js',
      'control-plane/dist/main.js',
      'data-plane/node_modules/x',
      'control-plane/bundle/main.js',
      'data-plane/bundle/main.js',
      'scripts/bench.mjs',
      'proto/src/grpc.test.ts',
      'test/e2e/sync.test.ts',
      'helm/gatehouse/values.yaml',
      '.git/HEAD',
      'data/store.json',
      'README.md',
    ]) {
      expect({ path, excluded: excluded(path) }).toEqual({ path, excluded: true });
    }
  },
  T,
);
