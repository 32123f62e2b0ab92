/**
 * The last N versions of the whole configuration (CONFIG_HISTORY), for `GET /config/history` and
 * `POST /config/rollback/{version}`. A version is the store revision (= snapshot version) the
 * write produced; each entry says when, who (the admin user) and what (method and path) wrote it.
 *
 * Two backings, one behaviour:
 * - file (STORE=file): DATA_DIR/history/<version>.json, each a complete store.json of that version
 *   (copy one over store.json to recover by hand), plus history/index.json with the entries'
 *   metadata; every file written atomically, the version file before the index, so a crash
 *   leaves at worst an orphan file (removed at the next start), never an entry without content.
 * - memory (STORE=kubernetes): per control-plane replica, lost on restart (see README).
 */
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Definitions } from '#proto/definition/index';
import type { Logger } from '#proto/logger';
import { writeFileAtomic } from './atomic-file.js';
import { deserialize, serialize } from './file-store.js';
import type { StoreState } from './index.js';

export const DEFAULT_HISTORY_LIMIT = 20;
export const HISTORY_DIR = 'history';
const INDEX_FILE = 'index.json';

/** Who and what wrote a version, as far as the control plane knows. */
export interface HistoryOrigin {
  /** The admin user of the token; `gatehouse` for the control plane itself (start-up). */
  author: string;
  /** e.g. `PUT /apis/users`, `PUT /config`, `rollback to 12`, `startup`. */
  action: string;
  user_agent?: string;
}

export interface HistoryEntry extends HistoryOrigin {
  version: number;
  /** ISO 8601. */
  time: string;
  hash: string;
  apis: number;
  oauth_servers: number;
  basic_auth_credentials: number;
}

export interface ConfigHistory {
  readonly limit: number;
  /** Records a committed store state (an existing entry of that version is replaced); the oldest beyond the limit are dropped. */
  record(state: StoreState, origin: HistoryOrigin): Promise<void>;
  /** Records the state as `startup` unless the newest entry already holds that content. */
  seed(state: StoreState): Promise<void>;
  /** Newest first. */
  list(): HistoryEntry[];
  /** The definitions of a kept version; undefined when it is not (or no longer) kept. */
  definitions(version: number): Promise<Definitions | undefined>;
  /** Waits for queued writes. */
  close(): Promise<void>;
}

/** Where entries' content lives; the index of entries is kept by the history itself. */
interface HistoryBacking {
  save(version: number, defs: Definitions, entries: HistoryEntry[]): Promise<void>;
  load(version: number): Promise<Definitions | undefined>;
  remove(versions: number[]): Promise<void>;
}

export interface HistoryOptions {
  limit?: number;
  logger: Logger;
  /** Clock, injectable for tests. */
  now?: () => Date;
}

function createHistory(backing: HistoryBacking, initial: HistoryEntry[], options: HistoryOptions): ConfigHistory {
  const limit = options.limit ?? DEFAULT_HISTORY_LIMIT;
  const now = options.now ?? (() => new Date());
  /** Oldest first. */
  let entries = [...initial].sort((a, b) => a.version - b.version);
  let tail: Promise<unknown> = Promise.resolve();

  /** One write at a time, so the index on disk always follows the order of the entries in memory. */
  function queued(task: () => Promise<void>): Promise<void> {
    const run = tail.then(task);
    tail = run.catch(() => undefined);
    return run;
  }

  const history: ConfigHistory = {
    limit,
    record(state, origin) {
      return queued(async () => {
        const entry: HistoryEntry = {
          version: state.revision,
          time: now().toISOString(),
          ...origin,
          hash: state.hash,
          apis: state.defs.apis.length,
          oauth_servers: state.defs.oauthServers.length,
          basic_auth_credentials: state.defs.basicAuthCredentials?.length ?? 0,
        };
        const next = [...entries.filter((e) => e.version !== entry.version), entry].sort((a, b) => a.version - b.version);
        const dropped = next.slice(0, Math.max(0, next.length - limit));
        const kept = next.slice(dropped.length);
        if (!kept.includes(entry)) return;
        await backing.save(entry.version, state.defs, kept);
        entries = kept;
        if (dropped.length > 0) await backing.remove(dropped.map((e) => e.version));
      });
    },
    async seed(state) {
      if (entries.at(-1)?.hash === state.hash) return;
      await history.record(state, { author: 'gatehouse', action: 'startup' });
    },
    list: () => [...entries].reverse(),
    async definitions(version) {
      await tail;
      return entries.some((e) => e.version === version) ? backing.load(version) : undefined;
    },
    async close() {
      await tail;
    },
  };
  return history;
}

/** STORE=kubernetes: history of this replica's writes, in memory. */
export function createMemoryHistory(options: HistoryOptions): ConfigHistory {
  const content = new Map<number, Definitions>();
  return createHistory(
    {
      async save(version, defs) {
        content.set(version, defs);
      },
      async load(version) {
        return content.get(version);
      },
      async remove(versions) {
        for (const v of versions) content.delete(v);
      },
    },
    [],
    options,
  );
}

const versionFile = (version: number) => `${version}.json`;

/** STORE=file: DATA_DIR/history/ (see the file comment). Unreadable entries are dropped with a warning. */
export async function openFileHistory(options: HistoryOptions & { dataDir: string }): Promise<ConfigHistory> {
  const dir = join(options.dataDir, HISTORY_DIR);
  const indexPath = join(dir, INDEX_FILE);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const writeIndex = (entries: HistoryEntry[]) => writeFileAtomic(indexPath, `${JSON.stringify(entries)}\n`);

  let initial: HistoryEntry[] = [];
  try {
    const parsed: unknown = JSON.parse(await readFile(indexPath, 'utf8'));
    if (Array.isArray(parsed)) initial = parsed.filter((e): e is HistoryEntry => Number.isSafeInteger((e as HistoryEntry)?.version));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') options.logger.warn({ err: String(err), path: indexPath }, 'config history index unreadable; starting a new history');
  }
  const files = new Set((await readdir(dir)).filter((f) => /^\d+\.json$/.test(f)));
  // A lowered CONFIG_HISTORY drops the oldest at once.
  initial = initial
    .filter((e) => files.has(versionFile(e.version)))
    .sort((a, b) => a.version - b.version)
    .slice(-(options.limit ?? DEFAULT_HISTORY_LIMIT));
  const kept = new Set(initial.map((e) => versionFile(e.version)));
  // Written but never indexed (a crash between the two writes), or dropped from the index.
  for (const orphan of [...files].filter((f) => !kept.has(f))) await rm(join(dir, orphan), { force: true });

  return createHistory(
    {
      async save(version, defs, entries) {
        await writeFileAtomic(join(dir, versionFile(version)), serialize(version, defs));
        await writeIndex(entries);
      },
      async load(version) {
        const path = join(dir, versionFile(version));
        try {
          return deserialize(path, await readFile(path, 'utf8')).defs;
        } catch (err) {
          options.logger.warn({ err: String(err), path }, 'config history entry unreadable');
          return undefined;
        }
      },
      async remove(versions) {
        for (const v of versions) await rm(join(dir, versionFile(v)), { force: true });
      },
    },
    initial,
    options,
  );
}
