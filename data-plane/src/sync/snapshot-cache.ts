/**
 * SNAPSHOT_CACHE: the last applied snapshot on disk, so a data plane that starts while no
 * control plane is reachable serves its last configuration. The file holds the snapshot
 * message as JSON (it may carry JWT secrets, hence mode 0600) and is replaced atomically.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import type { SnapshotMessage } from '#proto/snapshot/codec';

export interface SnapshotCache {
  readonly path: string;
  /** The cached message, or null when there is no cache file. Throws on an unreadable file. */
  load(): SnapshotMessage | null;
  /**
   * Writes a temp file, fsyncs it and renames it over the cache; saves run one at a time, and saves
   * made while one is writing coalesce into one write of the newest (a function is called then).
   */
  save(message: SnapshotMessage | (() => SnapshotMessage)): Promise<void>;
  /** Resolves once every save started so far has settled (shutdown waits for it). */
  flush(): Promise<void>;
}

export function createSnapshotCache(path: string): SnapshotCache {
  let queue: Promise<void> = Promise.resolve();
  /** The save waiting for the running one, and the newest message it will write. */
  type Waiting = { run: Promise<void>; message: SnapshotMessage | (() => SnapshotMessage) };
  let waiting: Waiting | null = null;

  async function write(message: SnapshotMessage): Promise<void> {
    const temp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    try {
      const file = await open(temp, 'w', 0o600);
      try {
        await file.writeFile(JSON.stringify(message));
        await file.sync();
      } finally {
        await file.close();
      }
      await rename(temp, path);
    } catch (err) {
      await rm(temp, { force: true });
      throw err;
    }
  }

  return {
    path,
    load() {
      let text: string;
      try {
        text = readFileSync(path, 'utf8');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw err;
      }
      return JSON.parse(text) as SnapshotMessage;
    },
    save(message) {
      if (waiting) {
        waiting.message = message;
        return waiting.run;
      }
      const next: Waiting = {
        message,
        run: queue.then(() => {
          waiting = null;
          return write(typeof next.message === 'function' ? next.message() : next.message);
        }),
      };
      waiting = next;
      queue = next.run.catch(() => undefined);
      return next.run;
    },
    flush() {
      return queue;
    },
  };
}
