/**
 * Durable file writes: temp file + fsync + rename + fsync of the directory, so a crash leaves
 * either the old or the new content, never a torn file, and the rename itself survives power loss.
 */
import { randomBytes } from 'node:crypto';
import { link, open, readdir, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/** `.<name>.<pid>.<random>.tmp` beside the target, so a crashed writer's leftovers can be recognised. */
const tempName = (path: string, pid: number | string, suffix: string): string => `.${basename(path)}.${pid}.${suffix}.tmp`;

async function writeTemp(path: string, data: string, mode: number): Promise<string> {
  const tmp = join(dirname(path), tempName(path, process.pid, randomBytes(6).toString('hex')));
  const fh = await open(tmp, 'wx', mode);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } catch (err) {
    await fh.close();
    await rm(tmp, { force: true });
    throw err;
  }
  await fh.close();
  return tmp;
}

/** Makes a created, renamed or removed name in `dir` survive power loss. */
export async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Replaces `path` atomically with `data` (file mode `mode`, default 0600). */
export async function writeFileAtomic(path: string, data: string, mode = 0o600): Promise<void> {
  const tmp = await writeTemp(path, data, mode);
  try {
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  await syncDir(dirname(path));
}

/**
 * Creates `path` with `data` only if it does not exist yet (atomically: a hard link fails on an
 * existing name). Returns false when the file was already there, so concurrent starters agree.
 */
export async function createFileAtomic(path: string, data: string, mode = 0o600): Promise<boolean> {
  const tmp = await writeTemp(path, data, mode);
  try {
    await link(tmp, path);
    await syncDir(dirname(path));
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  } finally {
    await rm(tmp, { force: true });
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Deletes the temp files of `path` that a writer killed between write and rename left behind
 * (a full copy of the file each). Call it before this process writes `path`: a temp carrying our
 * own pid is then a dead predecessor's (pid reuse, e.g. pid 1 in a container); one of a live
 * other process is left alone.
 */
export async function removeAbandonedTemps(path: string): Promise<void> {
  const [prefix, suffix] = tempName(path, '*', '*').split('*.*');
  for (const file of await readdir(dirname(path))) {
    if (!file.startsWith(prefix) || !file.endsWith(suffix)) continue;
    const pid = Number(file.slice(prefix.length).split('.')[0]);
    if (!Number.isSafeInteger(pid) || pid <= 0) continue;
    if (pid === process.pid || !processAlive(pid)) await rm(join(dirname(path), file), { force: true });
  }
}
