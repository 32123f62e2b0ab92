/**
 * deploy/Dockerfile without a container engine (none here): what the image relies on, checked for
 * real. The final stage's filesystem is assembled in a temporary directory from its own COPY lines
 * (the build stage's output = this checkout after `npm run build`; the deps stage = its COPY lines
 * plus its `npm ci --omit=dev`, run for real from package-lock.json), then the image's CMD starts
 * the control plane and the chart's args start the data plane from there: /healthz answers, and the
 * DP syncs from the CP, so no dev dependency and no file left out of the image is needed at run time.
 * Also: .dockerignore keeps in what the build stage copies and keeps out node_modules, dist, tests.
 */
import { execFile } from 'node:child_process';
import { cp as copy, mkdtemp, readdir, readFile, rm, stat, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { deploymentOf, onlyContainer } from '../helpers/chart-objects.js';
import { dockerignore, last, readDockerfile, type Dockerfile, type Stage } from '../helpers/dockerfile.js';
import { renderChart } from '../helpers/helm.js';
import { httpRequest } from '../helpers/http-request.js';
import { pollUntil } from '../helpers/poll-until.js';
import { REPO_ROOT, spawnService, type ServiceProcess } from '../helpers/service-process.js';
import { TEST_JOIN_TOKEN } from '../helpers/start-control-plane.js';

const run = promisify(execFile);
const T = 180_000;

let dockerfile: Dockerfile;
let workdir: string;
const dataDirs: string[] = [];
const processes: ServiceProcess[] = [];

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

async function start(name: string, argv: string[], env: Record<string, string>, listeners: string[]): Promise<ServiceProcess> {
  // `node [--flag ...] <script>`
  expect(argv[0]).toBe('node');
  expect(argv.length).toBeGreaterThanOrEqual(2);
  expect(argv.slice(1, -1).every((flag) => flag.startsWith('--'))).toBe(true);
  const imageEnv = Object.fromEntries(
    // `name=value`, split at the first `=` (a value may hold more: GLIBC_TUNABLES).
    dockerfile.final.instructions
      .filter((i) => i.keyword === 'ENV')
      .map((i) => [i.args[0].slice(0, i.args[0].indexOf('=')), i.args[0].slice(i.args[0].indexOf('=') + 1)]),
  );
  // Same as `node <script>` with the image's WORKDIR as cwd: node resolves the script against the
  // cwd, and every import (node_modules, package.json "imports") from the script's own location.
  const proc = await spawnService({
    name,
    script: join(workdir, argv.at(-1)!),
    nodeFlags: argv.slice(1, -1),
    env: { ...imageEnv, ...env },
    listeners,
    startTimeoutMs: 30_000,
  });
  processes.push(proc);
  return proc;
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
  for (const p of processes.reverse()) await p.stop();
  if (workdir) await rm(workdir, { recursive: true, force: true });
  for (const dir of dataDirs) await rm(dir, { recursive: true, force: true });
}, T);

test('multi-stage: Node 20 slim base, build and deps stages, tini as PID 1, a non-root numeric user', () => {
  expect(dockerfile.stages.map((s) => s.name)).toEqual(['build', 'deps', String(dockerfile.stages.length - 1)]);
  for (const s of dockerfile.stages) expect(s.from).toMatch(/^node:20(\.\d+)*-\w+-slim$/);
  const build = dockerfile
    .stage('build')
    .instructions.filter((i) => i.keyword === 'RUN')
    .map((i) => i.text);
  expect(build).toEqual(['npm ci --no-audit --no-fund', 'npm run build:image']);
  expect(dockerfile.stage('deps').instructions.find((i) => i.keyword === 'RUN')?.text).toMatch(/^npm ci --omit=dev /);
  expect(dockerfile.final.instructions.find((i) => i.keyword === 'RUN')?.text).toMatch(/apt-get install -y --no-install-recommends tini/);
  expect(last(dockerfile.final, 'ENTRYPOINT')?.args).toEqual(['/usr/bin/tini', '--']);
  const user = last(dockerfile.final, 'USER')!.args[0];
  expect(user).toMatch(/^\d+:\d+$/);
  expect(Number(user.split(':')[0])).toBeGreaterThan(0);
  expect(last(dockerfile.final, 'WORKDIR')?.args).toEqual(['/app']);
  // The final stage copies nothing from the build context but package.json (no sources, no tests).
  const contextCopies = dockerfile.final.instructions.filter((i) => i.keyword === 'COPY' && !i.flags.from).flatMap((i) => i.args.slice(0, -1));
  expect(contextCopies).toEqual(['package.json']);
});

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
  'the image’s CMD starts the control plane and the chart’s args the data plane; /healthz answers and the DP syncs',
  async () => {
    const cmd = last(dockerfile.final, 'CMD')!;
    expect(cmd.json).toBe(true);
    // Outside the image's tree (a volume in a pod): the tree's listing is checked in another test, in any order.
    const dataDir = await mkdtemp(join(tmpdir(), 'gatehouse-image-data-'));
    dataDirs.push(dataDir);
    const cp = await start(
      'image control plane',
      cmd.args,
      {
        ADMIN_PORT: '0',
        GRPC_PORT: '0',
        ADMIN_HOST: '127.0.0.1',
        GRPC_HOST: '127.0.0.1',
        DATA_DIR: dataDir,
        ADMIN_PASSWORD: 'image-test-password',
        ADMIN_JWT_SECRET: 'x'.repeat(32),
        GRPC_JOIN_TOKEN: TEST_JOIN_TOKEN,
      },
      ['admin', 'grpc'],
    );
    expect((await httpRequest(`http://127.0.0.1:${cp.ports.admin}/healthz`)).status).toBe(200);
    // The console's static files reached the image (served from control-plane/console/).
    for (const file of ['/console/', '/console/js/main.js'])
      expect({ file, status: (await httpRequest(`http://127.0.0.1:${cp.ports.admin}${file}`)).status }).toEqual({ file, status: 200 });

    const dpArgs = onlyContainer(deploymentOf(await renderChart(), 'data-plane')).args!;
    const dp = await start(
      'image data plane',
      dpArgs,
      {
        PROXY_PORT: '0',
        STATUS_PORT: '0',
        PROXY_HOST: '127.0.0.1',
        STATUS_HOST: '127.0.0.1',
        CONTROL_PLANE_ADDR: `127.0.0.1:${cp.ports.grpc}`,
        GRPC_JOIN_TOKEN: TEST_JOIN_TOKEN,
      },
      ['proxy', 'status'],
    );
    expect((await httpRequest(`http://127.0.0.1:${dp.ports.status}/healthz`)).status).toBe(200);
    await pollUntil(async () => ((await httpRequest(`http://127.0.0.1:${dp.ports.status}/readyz`)).status === 200 ? true : undefined), {
      what: 'the image data plane to apply a snapshot from the image control plane',
      timeoutMs: 15_000,
      details: () => `${cp.recentLogs()}\n${dp.recentLogs()}`,
    });
    // Both resolved their code from the image's tree, not from this checkout.
    for (const p of [cp, dp]) expect(p.lines().some((l) => /Cannot find|ERR_MODULE_NOT_FOUND/.test(l.raw))).toBe(false);
  },
  T,
);

test(
  'the build stage compiles from what its COPY lines bring in through .dockerignore, and nothing else',
  async () => {
    const excluded = dockerignore(await readFile(join(REPO_ROOT, '.dockerignore'), 'utf8'));
    const dir = await mkdtemp(join(tmpdir(), 'gatehouse-build-'));
    try {
      const stage = dockerfile.stage('build');
      for (const i of stage.instructions) {
        if (i.keyword === 'COPY') {
          for (const src of i.args.slice(0, -1)) {
            await copy(join(REPO_ROOT, src), join(dir, src), { recursive: true, filter: (from) => from === REPO_ROOT || !excluded(relative(REPO_ROOT, from)) });
          }
        } else if (i.keyword === 'RUN' && /^npm ci( |$)/.test(i.text)) {
          // The same package-lock.json: this checkout's install stands in for the stage's (no network for a second one).
          await symlink(join(REPO_ROOT, 'node_modules'), join(dir, 'node_modules'));
        } else if (i.keyword === 'RUN') {
          const script = /^npm run ([\w:-]+)$/.exec(i.text);
          if (!script) throw new Error(`build stage RUN ${i.text}: not emulated`);
          // A non-zero exit fails `docker build` even when tsc wrote its output, so the exit status is what counts.
          await run('npm', ['run', script[1]], { cwd: dir, maxBuffer: 16 * 1024 * 1024 });
        }
      }
      for (const output of [
        'proto/dist/grpc.js',
        'control-plane/dist/main.js',
        'data-plane/dist/main.js',
        'control-plane/bundle/main.js',
        'data-plane/bundle/main.js',
      ]) {
        expect({
          output,
          built: await stat(join(dir, output)).then(
            () => true,
            () => false,
          ),
        }).toEqual({ output, built: true });
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
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
