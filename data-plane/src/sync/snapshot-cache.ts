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
   * Writes a temp file, fsyncs it and renames it over the cache; saves run one at a time, at most one
   * per `minIntervalMs`, and saves made while one is writing or waiting coalesce into one write of the
   * newest (a function is called then).
   */
  save(message: SnapshotMessage | (() => SnapshotMessage)): Promise<void>;
  /** Resolves once every save started so far has settled, writing a waiting one at once (shutdown waits for it). */
  flush(): Promise<void>;
}

/**
 * The whole content is written (the file is one snapshot message), which takes the DP's thread for time
 * that grows with the configuration: written after every push, it would slow the requests of a DP under
 * frequent pushes. A cold start without a CP serves a configuration at most this much older instead.
 */
export const DEFAULT_MIN_INTERVAL_MS = 5_000;

/** Definitions stringified, and written, per piece. */
const ITEMS_PER_PIECE = 100;

/**
 * JSON.stringify(message) in pieces (their concatenation is that text): the lists ITEMS_PER_PIECE
 * items at a time, each piece written to the file before the next is made, so the DP's thread is
 * never held for long and the whole text never exists at once: in one piece, the requests arriving
 * meanwhile would wait out building, stringifying and encoding the whole configuration.
 */
export async function* messageJsonPieces(message: SnapshotMessage): AsyncGenerator<string> {
  let first = true;
  for (const [key, value] of Object.entries(message)) {
    if (value === undefined || typeof value === 'function') continue; // as JSON.stringify leaves them out
    const head = `${first ? '{' : ','}${JSON.stringify(key)}:`;
    first = false;
    if (!Array.isArray(value)) {
      yield head + JSON.stringify(value);
      continue;
    }
    if (value.length === 0) {
      yield `${head}[]`;
      continue;
    }
    for (let i = 0; i < value.length; i += ITEMS_PER_PIECE) {
      const items = value
        .slice(i, i + ITEMS_PER_PIECE)
        .map((item) => JSON.stringify(item))
        .join(',');
      yield `${i === 0 ? `${head}[` : ','}${items}${i + ITEMS_PER_PIECE >= value.length ? ']' : ''}`;
    }
  }
  yield first ? '{}' : '}';
}

export function createSnapshotCache(path: string, { minIntervalMs = DEFAULT_MIN_INTERVAL_MS } = {}): SnapshotCache {
  let queue: Promise<void> = Promise.resolve();
  let lastWrite = -Infinity;
  /** Ends the current wait for the interval early (flush). */
  let hurry: (() => void) | null = null;
  let flushing = false;

  function interval(): Promise<void> {
    const wait = lastWrite + minIntervalMs - performance.now();
    if (wait <= 0 || flushing) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, wait);
      function done() {
        clearTimeout(timer);
        hurry = null;
        resolve();
      }
      hurry = done;
    });
  }
  /** The save waiting for the running one, and the newest message it will write. */
  type Waiting = { run: Promise<void>; message: SnapshotMessage | (() => SnapshotMessage) };
  let waiting: Waiting | null = null;

  async function write(message: SnapshotMessage): Promise<void> {
    const temp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    try {
      const file = await open(temp, 'w', 0o600);
      try {
        // FileHandle.writeFile writes at the current position and loops over short writes (write() would not).
        for await (const piece of messageJsonPieces(message)) await file.writeFile(piece);
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
        run: queue.then(interval).then(() => {
          waiting = null;
          lastWrite = performance.now();
          return write(typeof next.message === 'function' ? next.message() : next.message);
        }),
      };
      waiting = next;
      queue = next.run.catch(() => undefined);
      return next.run;
    },
    async flush() {
      flushing = true;
      hurry?.();
      try {
        await queue;
      } finally {
        flushing = false;
      }
    },
  };
}
