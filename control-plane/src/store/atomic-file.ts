/**
 * Durable file writes: temp file + fsync + rename + fsync of the directory, so a crash leaves
 * either the old or the new content, never a torn file, and the rename itself survives power loss.
 */
import { randomBytes } from 'node:crypto';
import { link, open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

async function writeTemp(path: string, data: string, mode: number): Promise<string> {
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
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

async function syncDir(dir: string): Promise<void> {
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
