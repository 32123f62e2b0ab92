/**
 * The image built from deploy/Dockerfile as written (scripts/test-images.sh: buildah, on the local
 * node:20-bookworm-slim stand-in), imported into a real containerd and run with runc as a kubelet
 * would run it: the image's own user (10001) and entrypoint (tini), a read-only root filesystem,
 * writable directories only where the chart mounts emptyDirs. The CP answers /healthz and /readyz, the
 * DP started with the chart's args after the image's ENTRYPOINT syncs from it, and the test upstream
 * image answers. The build is cached (keyed on the Dockerfile and the files it takes), so a run whose
 * inputs did not change only imports the archives.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { deploymentOf, onlyContainer } from '../helpers/chart-objects.js';
import { missingContainerdTools, startContainerd, type Containerd } from '../helpers/containerd.js';
import { last, readDockerfile, type Dockerfile } from '../helpers/dockerfile.js';
import { freePort, freePorts } from '../helpers/free-port.js';
import { renderChart } from '../helpers/helm.js';
import { httpRequest } from '../helpers/http-request.js';
import { pollUntil } from '../helpers/poll-until.js';
import { REPO_ROOT } from '../helpers/service-process.js';
import { TEST_JOIN_TOKEN } from '../helpers/start-control-plane.js';

const IMAGES_SCRIPT = join(REPO_ROOT, 'scripts', 'test-images.sh');
// A cold build (debootstrap, two `npm ci`, tsc) takes 5-12 minutes on a loaded 2-core machine.
const BUILD_TIMEOUT = 1_200_000;
const T = 120_000;

function missingRequirements(): string[] {
  const onPath = (tool: string) => (process.env.PATH ?? '').split(':').some((dir) => dir && existsSync(join(dir, tool)));
  const missing = [...['buildah', 'debootstrap'].filter((tool) => !onPath(tool)), ...missingContainerdTools()];
  if (process.getuid?.() !== 0) missing.push('root (buildah and containerd run as root)');
  return missing;
}

const missing = missingRequirements();
// Without a builder or a container runtime the test cannot run here; in CI that is a failure, never a skip.
const suite = missing.length > 0 && process.env.CI !== 'true' ? describe.skip : describe;
if (missing.length > 0 && process.env.CI !== 'true') console.warn(`test/image skipped: missing ${missing.join(', ')}`);

interface ImageConfig {
  User?: string;
  Entrypoint?: string[];
  Cmd?: string[];
  WorkingDir?: string;
  Env?: string[];
  ExposedPorts?: Record<string, object>;
}

function script(args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('bash', [IMAGES_SCRIPT, ...args], { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`test-images.sh ${args.join(' ')} failed: ${err.message}\n${String(stderr).slice(-4000)}`));
      else resolve(String(stdout));
    });
  });
}

suite('the image built from deploy/Dockerfile, run by containerd', () => {
  let containerd: Containerd;
  let dockerfile: Dockerfile;
  const images: Record<string, string> = {};
  let containers = 0;

  beforeAll(async () => {
    if (missing.length > 0) throw new Error(`test/image needs ${missing.join(', ')} (CI=true): .ci/run installs buildah, debootstrap and containerd`);
    dockerfile = await readDockerfile(join(REPO_ROOT, 'deploy/Dockerfile'));
    await script(['build'], BUILD_TIMEOUT);
    for (const line of (await script(['names'], 10_000)).split('\n')) {
      const m = /^(\w+)=(\S+)$/.exec(line);
      if (m) images[m[1]] = m[2];
    }
    containerd = await startContainerd();
    await script(['load', containerd.address], BUILD_TIMEOUT);
  }, BUILD_TIMEOUT * 2);

  afterAll(async () => {
    await containerd?.stop();
  }, T);

  /** The image's config as containerd holds it (manifest → config blob). */
  async function imageConfig(image: string): Promise<ImageConfig> {
    const listed = (await containerd.ctrOk(['images', 'ls'])).split('\n').find((line) => line.split(/\s+/)[0] === image);
    if (!listed) throw new Error(`containerd has no ${image}`);
    const manifest = JSON.parse(await containerd.ctrOk(['content', 'get', listed.split(/\s+/)[2]])) as { config: { digest: string } };
    return (JSON.parse(await containerd.ctrOk(['content', 'get', manifest.config.digest])) as { config: ImageConfig }).config;
  }

  interface Container {
    id: string;
    /** The task's PID 1, as the host sees it. */
    pid: number;
    logs(): Promise<string>;
  }

  /**
   * `ctr run` with the image's own user, entrypoint and cmd (`args` replaces the whole process, so a
   * caller passing args puts the ENTRYPOINT first, as Kubernetes does with a container's args), a
   * read-only root, the host's network (ports chosen free) and tmpfs where the chart mounts emptyDirs.
   */
  async function runContainer(image: string, env: Record<string, string>, writable: string[], args: string[] = []): Promise<Container> {
    const id = `image-test-${++containers}`;
    const log = join(containerd.dir, `${id}.log`);
    await containerd.ctrOk([
      'run',
      '--detach',
      '--read-only',
      '--net-host',
      // No cgroup path: runc makes /<id> and removes it with the task, leaving no parent behind.
      '--cgroup',
      '',
      '--log-uri',
      `file://${log}`,
      ...writable.flatMap((dir) => ['--mount', `type=tmpfs,src=tmpfs,dst=${dir},options=nosuid:nodev:mode=1777`]),
      ...Object.entries(env).flatMap(([name, value]) => ['--env', `${name}=${value}`]),
      image,
      id,
      ...args,
    ]);
    const task = (await containerd.ctrOk(['tasks', 'ls'])).split('\n').find((line) => line.split(/\s+/)[0] === id);
    const pid = Number(task?.split(/\s+/)[1]);
    if (!pid) throw new Error(`no task ${id}: ${task}`);
    return { id, pid, logs: () => readFile(log, 'utf8').catch(() => '') };
  }

  /** Name, uid and command line of a process, from /proc. */
  async function processOf(pid: number): Promise<{ name: string; uid: string; cmdline: string[] }> {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const field = (name: string) => new RegExp(`^${name}:\\s+(.*)$`, 'm').exec(status)?.[1] ?? '';
    return { name: field('Name'), uid: field('Uid'), cmdline: (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').filter(Boolean) };
  }

  async function childOf(pid: number): Promise<number> {
    const children = (await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8')).trim().split(/\s+/).filter(Boolean);
    expect(children).toHaveLength(1);
    return Number(children[0]);
  }

  async function startControlPlane(): Promise<{ container: Container; admin: number; grpc: number }> {
    const [admin, grpc] = await freePorts(2);
    const container = await runContainer(
      images.GATEHOUSE_IMAGE,
      {
        ADMIN_HOST: '127.0.0.1',
        ADMIN_PORT: String(admin),
        GRPC_HOST: '127.0.0.1',
        GRPC_PORT: String(grpc),
        ADMIN_PASSWORD: 'image-test-password',
        ADMIN_JWT_SECRET: 'x'.repeat(32),
        GRPC_JOIN_TOKEN: TEST_JOIN_TOKEN,
        DATA_DIR: '/var/lib/gatehouse',
      },
      ['/tmp', '/var/lib/gatehouse'],
    );
    await pollUntil(async () => ((await httpRequest(`http://127.0.0.1:${admin}/readyz`)).status === 200 ? true : undefined), {
      what: 'the control plane in its container to be ready',
      timeoutMs: 60_000,
      details: () => containerd.logs(),
    }).catch(async (err: Error) => {
      throw new Error(`${err.message}\ncontainer output:\n${await container.logs()}`);
    });
    return { container, admin, grpc };
  }

  test(
    'containerd holds the images under the names `test-images.sh names` prints',
    async () => {
      expect(Object.keys(images).sort()).toEqual(['GATEHOUSE_IMAGE', 'UPSTREAM_IMAGE']);
      const listed = (await containerd.ctrOk(['images', 'ls', '-q'])).split('\n').filter(Boolean);
      for (const image of Object.values(images)) expect(listed).toContain(image);
    },
    T,
  );

  test(
    'the image config: user 10001, tini as entrypoint, the CP as cmd, the Dockerfile’s workdir, env and ports',
    async () => {
      const config = await imageConfig(images.GATEHOUSE_IMAGE);
      expect(config.User).toBe('10001:10001');
      expect(config.Entrypoint).toEqual(['/usr/bin/tini', '--']);
      expect(config.Cmd).toEqual(['node', 'control-plane/bundle/main.js']);
      // The same as the Dockerfile's final stage says (what a change to it must carry into the image).
      expect(config.User).toBe(last(dockerfile.final, 'USER')!.args[0]);
      expect(config.Entrypoint).toEqual(last(dockerfile.final, 'ENTRYPOINT')!.args);
      expect(config.Cmd).toEqual(last(dockerfile.final, 'CMD')!.args);
      expect(config.WorkingDir).toBe(last(dockerfile.final, 'WORKDIR')!.args[0]);
      for (const env of dockerfile.final.instructions.filter((i) => i.keyword === 'ENV').map((i) => i.args[0])) expect(config.Env).toContain(env);
      // The base's PATH: node and npm in /usr/local/bin, as in the official image.
      expect(config.Env).toContain('PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin');
      const exposed = dockerfile.final.instructions.filter((i) => i.keyword === 'EXPOSE').flatMap((i) => i.args);
      expect(Object.keys(config.ExposedPorts ?? {}).sort()).toEqual(exposed.map((port) => `${port}/tcp`).sort());
    },
    T,
  );

  test(
    'a container of the image runs the CP under tini as uid 10001 on a read-only root; /healthz and /readyz answer; SIGTERM stops it',
    async () => {
      const { container, admin } = await startControlPlane();
      expect((await httpRequest(`http://127.0.0.1:${admin}/healthz`)).status).toBe(200);
      const readyz = await httpRequest(`http://127.0.0.1:${admin}/readyz`);
      expect(readyz.json).toMatchObject({ ready: true });
      // PID 1 is tini, the CP its only child, both as the image's user.
      expect(await processOf(container.pid)).toEqual({
        name: 'tini',
        uid: '10001\t10001\t10001\t10001',
        cmdline: ['/usr/bin/tini', '--', 'node', 'control-plane/bundle/main.js'],
      });
      const node = await childOf(container.pid);
      expect(await processOf(node)).toEqual({ name: 'node', uid: '10001\t10001\t10001\t10001', cmdline: ['node', 'control-plane/bundle/main.js'] });
      const environ = (await readFile(`/proc/${node}/environ`, 'utf8')).split('\0');
      expect(environ).toEqual(expect.arrayContaining(['NODE_ENV=production', 'GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072']));
      // The root filesystem is read-only; the store went to the tmpfs at DATA_DIR.
      const write = await containerd.ctr(['tasks', 'exec', '--exec-id', 'write', container.id, 'sh', '-c', 'touch /app/x']);
      expect(write.code).not.toBe(0);
      expect(write.stderr + write.stdout).toMatch(/Read-only file system/);
      const ls = await containerd.ctrOk(['tasks', 'exec', '--exec-id', 'ls', container.id, 'ls', '-n', '/var/lib/gatehouse']);
      expect(ls).toMatch(/ 10001 +10001 .* store\.json/);
      // The build's npm settings (this machine's CA file, mounted over /usr/local/etc for the RUN steps only) are not in the image.
      expect(await containerd.ctrOk(['tasks', 'exec', '--exec-id', 'etc', container.id, 'ls', '-A', '/usr/local/etc'])).toBe('');
      // The console's static files reached the image (from the build stage).
      for (const file of ['/console/', '/console/js/main.js'])
        expect({ file, status: (await httpRequest(`http://127.0.0.1:${admin}${file}`)).status }).toEqual({ file, status: 200 });

      // SIGTERM to PID 1 (what the kubelet sends): tini forwards it and the CP shuts down.
      await containerd.ctrOk(['tasks', 'kill', container.id]);
      await pollUntil(
        async () =>
          /^\S+\s+\d+\s+STOPPED/m.test((await containerd.ctrOk(['tasks', 'ls'])).split('\n').find((l) => l.startsWith(`${container.id} `)) ?? '')
            ? true
            : undefined,
        {
          what: 'the CP container to stop on SIGTERM',
          timeoutMs: 30_000,
        },
      );
      const logs = await container.logs();
      expect(logs).toMatch(/"signal":"SIGTERM".*"msg":"shutting down"/);
      expect(logs).toMatch(/"msg":"stopped"/);
    },
    T,
  );

  test(
    'the DP, started with the chart’s args after the image’s ENTRYPOINT, syncs from the CP and is ready',
    async () => {
      const { grpc } = await startControlPlane();
      const config = await imageConfig(images.GATEHOUSE_IMAGE);
      const chartArgs = onlyContainer(deploymentOf(await renderChart(), 'data-plane')).args!;
      const [proxy, status] = await freePorts(2);
      const dp = await runContainer(
        images.GATEHOUSE_IMAGE,
        {
          PROXY_HOST: '127.0.0.1',
          PROXY_PORT: String(proxy),
          STATUS_HOST: '127.0.0.1',
          STATUS_PORT: String(status),
          CONTROL_PLANE_ADDR: `127.0.0.1:${grpc}`,
          GRPC_JOIN_TOKEN: TEST_JOIN_TOKEN,
          SNAPSHOT_CACHE: '/var/cache/gatehouse/snapshot.json',
        },
        ['/tmp', '/var/cache/gatehouse'],
        [...config.Entrypoint!, ...chartArgs],
      );
      const ready = await pollUntil(
        async () => {
          const res = await httpRequest(`http://127.0.0.1:${status}/readyz`);
          return res.status === 200 ? res : undefined;
        },
        { what: 'the data plane in its container to apply a snapshot', timeoutMs: 60_000 },
      ).catch(async (err: Error) => {
        throw new Error(`${err.message}\ncontainer output:\n${await dp.logs()}`);
      });
      expect(ready.json).toMatchObject({ ready: true, version: expect.any(Number) });
      expect((await httpRequest(`http://127.0.0.1:${status}/healthz`)).status).toBe(200);
      const node = await childOf(dp.pid);
      expect(await processOf(node)).toEqual({ name: 'node', uid: '10001\t10001\t10001\t10001', cmdline: chartArgs });
      // The snapshot cache went to its tmpfs, written by the image's user.
      const ls = await containerd.ctrOk(['tasks', 'exec', '--exec-id', 'ls', dp.id, 'ls', '-n', '/var/cache/gatehouse']);
      expect(ls).toMatch(/ 10001 +10001 .* snapshot\.json/);
    },
    T,
  );

  test(
    'the test upstream image answers with the host that served the request, as a non-root user',
    async () => {
      const port = await freePort();
      const upstream = await runContainer(images.UPSTREAM_IMAGE, { PORT: String(port) }, []);
      const res = await pollUntil(
        async () => {
          const r = await httpRequest(`http://127.0.0.1:${port}/echo?status=201`, { method: 'POST', body: 'hello' });
          return r.status === 201 ? r : undefined;
        },
        { what: 'the upstream container to answer', timeoutMs: 30_000 },
      ).catch(async (err: Error) => {
        throw new Error(`${err.message}\ncontainer output:\n${await upstream.logs()}`);
      });
      expect(res.json).toMatchObject({ method: 'POST', url: '/echo?status=201', bodyLength: 5, host: expect.any(String) });
      expect(res.headers['x-upstream-host']).toBe((res.json as { host: string }).host);
      expect((await processOf(upstream.pid)).uid).toBe('1000\t1000\t1000\t1000');
    },
    T,
  );
});
