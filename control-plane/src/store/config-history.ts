/**
 * The last N versions of the whole configuration (CONFIG_HISTORY), for `GET /config/history` and
 * `POST /config/rollback/{version}`. A version is the store revision (= snapshot version) the
 * write produced; each entry says when, who (the admin user) and what (method and path) wrote it.
 *
 * Two backings, one behaviour:
 * - file (STORE=file): DATA_DIR/history/journal, one line per entry appended and fdatasynced (journal.ts:
 *   the entry, a sequence number `seq` and the definitions changed since the previous line), on top
 *   of history/base.json, a complete store.json of an older version (plus `"seq"`: the last line it
 *   holds). A version's content is rebuilt on demand (base + lines up to it), so a write costs what
 *   it changes. When the journal outgrows the base, the oldest kept entry's content becomes the new
 *   base (written atomically), then the journal is replaced by its lines from that entry on (atomically):
 *   a crash between the two leaves lines the base already holds, which a load skips by `seq`. The
 *   compaction runs beside the writes, not on one's path: it rewrites a base as large as the whole
 *   configuration, which no write should wait for. Only its swap of the journal, which carries over the lines appended meanwhile, takes a turn between appends.
 *   A previous release's history/<version>.json + index.json are converted at the first start.
 * - memory (STORE=kubernetes): per control-plane replica, lost on restart (docs/kubernetes.md).
 */
import { type FileHandle, mkdir, open, readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Definitions } from '#proto/definition/index';
import type { Logger } from '#proto/logger';
import { removeAbandonedTemps, writeFileAtomic } from './atomic-file.js';
import { deserialize, serialize } from './file-store.js';
import type { StoreState } from './index.js';
import { changesBetween, createReplay, encodeRecord, openJournal, parseJournal, type JournalFile } from './journal.js';
import { createTurns, settled } from '#proto/turns';

export const DEFAULT_HISTORY_LIMIT = 20;
export const HISTORY_DIR = 'history';

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
  /** Absent in entries recorded before key_auth existed. */
  key_auth_credentials?: number;
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
  save(entry: HistoryEntry, defs: Definitions, entries: HistoryEntry[]): Promise<void>;
  load(version: number): Promise<Definitions | undefined>;
  remove(versions: number[]): Promise<void>;
  /** The store holds the newest entry's content: `state.defs` (seed). */
  adopt?(state: StoreState): void;
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
  /** One write at a time, so the index on disk always follows the order of the entries in memory. */
  const queued = createTurns();

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
          key_auth_credentials: state.defs.keyAuthCredentials?.length ?? 0,
        };
        const next = [...entries.filter((e) => e.version !== entry.version), entry].sort((a, b) => a.version - b.version);
        const dropped = next.slice(0, Math.max(0, next.length - limit));
        const kept = next.slice(dropped.length);
        if (!kept.includes(entry)) return;
        await backing.save(entry, state.defs, kept);
        entries = kept;
        if (dropped.length > 0) await backing.remove(dropped.map((e) => e.version));
      });
    },
    async seed(state) {
      if (entries.at(-1)?.hash === state.hash) return backing.adopt?.(state);
      await history.record(state, { author: 'gatehouse', action: 'startup' });
    },
    list: () => [...entries].reverse(),
    async definitions(version) {
      await settled(queued);
      return entries.some((e) => e.version === version) ? backing.load(version) : undefined;
    },
    async close() {
      await settled(queued);
    },
  };
  return history;
}

/** STORE=kubernetes: history of this replica's writes, in memory. */
export function createMemoryHistory(options: HistoryOptions): ConfigHistory {
  const content = new Map<number, Definitions>();
  return createHistory(
    {
      async save(entry, defs) {
        content.set(entry.version, defs);
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

export const HISTORY_BASE = 'base.json';
export const HISTORY_JOURNAL = 'journal';
/** A previous release's files: history/index.json and history/<version>.json. */
const LEGACY_INDEX = 'index.json';
const LEGACY_VERSION_FILE = /^\d+\.json$/;
/** As the store's (file-store.ts): below this the journal is never compacted. */
const COMPACT_MIN_BYTES = 64 * 1024;

interface Line {
  seq: number;
  entry: HistoryEntry;
  /** Its length in the journal. */
  bytes: number;
  /** The journal's length up to and with it: a compaction copies what follows without parsing it. */
  end: number;
  /**
   * Its content while its entry is kept and it was written by this process (shared with the store:
   * an array of references): compaction and rollback then parse nothing (50,000 APIs: 2–4 s).
   */
  defs?: Definitions;
}

/** `seq` is the first member of base.json, so it is read without parsing the rest (15 MB at 50,000 APIs). */
function baseSeqOf(path: string, head: string): number {
  const seq = /^\{"seq":(\d+),/.exec(head)?.[1];
  if (seq === undefined) throw new Error(`${path} does not start with its "seq"`);
  return Number(seq);
}

/** `length` bytes of `path` from `position` (fewer at its end); undefined when there is no such file. */
async function readRange(path: string, position: number, length: number): Promise<Buffer | undefined> {
  let fh: FileHandle;
  try {
    fh = await open(path, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  try {
    const { buffer, bytesRead } = await fh.read(Buffer.alloc(length), 0, length, position);
    return buffer.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

async function readBaseSeq(path: string): Promise<number> {
  const head = await readRange(path, 0, 40);
  return head === undefined ? 0 : baseSeqOf(path, head.toString('utf8'));
}

/** An error of the file system itself (EACCES, EISDIR, EIO…), not of a file's content: never read as "no history". */
function isFileSystemError(err: unknown): boolean {
  return typeof (err as NodeJS.ErrnoException)?.errno === 'number' && typeof (err as NodeJS.ErrnoException).syscall === 'string';
}

async function readIfExists(path: string): Promise<Buffer | undefined> {
  try {
    return await readFile(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

async function readLegacyIndex(dir: string, logger: Logger): Promise<HistoryEntry[] | undefined> {
  const text = await readIfExists(join(dir, LEGACY_INDEX));
  if (text === undefined) return undefined;
  try {
    const parsed: unknown = JSON.parse(text.toString('utf8'));
    if (Array.isArray(parsed))
      return parsed.filter((e): e is HistoryEntry => Number.isSafeInteger((e as HistoryEntry)?.version)).sort((a, b) => a.version - b.version);
  } catch {
    // Unreadable: nothing to convert.
  }
  logger.warn({ path: join(dir, LEGACY_INDEX) }, 'previous config history index unreadable; not converted');
  return [];
}

/**
 * STORE=file: DATA_DIR/history/ (see the file comment). A damaged journal or base starts a new history, with a
 * warning; one the file system cannot read (EACCES, EIO…) is an error: only a missing file means no history.
 */
export async function openFileHistory(options: HistoryOptions & { dataDir: string }): Promise<ConfigHistory> {
  const { logger } = options;
  const dir = join(options.dataDir, HISTORY_DIR);
  const basePath = join(dir, HISTORY_BASE);
  const journalPath = join(dir, HISTORY_JOURNAL);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  for (const path of [basePath, journalPath]) await removeAbandonedTemps(path);
  const legacy = await readLegacyIndex(dir, logger);
  // Left by a conversion that a crash cut short: it starts again.
  if (legacy) for (const path of [basePath, journalPath]) await rm(path, { force: true });

  /**
   * Lines the base holds (`seq` ≤ baseSeq) are listed only from baseSeq on: older ones' content is gone. Their `seq`s
   * run without a gap (a load refuses a journal with one), so line `seq` is `lines[seq - lines[0].seq]`.
   */
  let baseSeq = 0;
  let lines: Line[] = [];
  /**
   * The lines that hold their `defs`, a few (kept entries written by this process): a write visits these, not every
   * line since the last compaction, which at 10,000 APIs can be thousands of them: a write's cost stays what it
   * changes (scripts/bench-store-writes.mjs measures it).
   */
  let holding: Line[] = [];
  let validBytes = 0;
  try {
    baseSeq = await readBaseSeq(basePath);
    const { records, ends, validBytes: valid, tornBytes } = parseJournal((await readIfExists(journalPath)) ?? Buffer.alloc(0));
    if (tornBytes > 0) logger.warn({ path: journalPath, bytes: tornBytes }, 'dropped the torn last config history record');
    for (const [i, { seq, changes: _changes, order: _order, ...entry }] of records.entries()) {
      if (!Number.isSafeInteger(seq) || !Number.isSafeInteger(entry.version)) throw new Error('a record without seq or version');
      if ((seq as number) < baseSeq) continue;
      const expected = lines.length > 0 ? lines.at(-1)!.seq + 1 : Math.max(baseSeq, 1);
      if (seq !== expected) throw new Error(`record seq ${String(seq)}, expected ${expected}`);
      lines.push({ seq: seq as number, entry: entry as unknown as HistoryEntry, bytes: ends[i] - (i > 0 ? ends[i - 1] : 0), end: ends[i] });
    }
    validBytes = valid;
  } catch (err) {
    if (isFileSystemError(err)) throw err;
    logger.warn({ err, path: journalPath }, 'config history unreadable; starting a new history');
    for (const path of [basePath, journalPath]) await rm(path, { force: true });
    [baseSeq, lines, validBytes] = [0, [], 0];
  }
  let journal: JournalFile = await openJournal(journalPath, validBytes);
  let baseBytes = (await readIfExists(basePath))?.length ?? 0;
  /** The content after the last line, when known (else rebuilt from the files). */
  let tip: Definitions | undefined = lines.length === 0 && baseSeq === 0 ? { apis: [], oauthServers: [] } : undefined;

  /**
   * The content after line `seq`: the base plus the lines after it up to `seq`, each definition
   * re-validated. The journal is read before the base, and lines the base holds are skipped by the
   * base's own `seq`: a compaction that swaps them meanwhile leaves a pair that still fits.
   */
  async function contentAt(seq: number): Promise<Definitions> {
    const lineBytes = (await readIfExists(journalPath)) ?? Buffer.alloc(0);
    const text = (await readIfExists(basePath))?.toString('utf8');
    const from = text === undefined ? 0 : baseSeqOf(basePath, text);
    if (from > seq) throw new Error(`line ${seq} is no longer kept (the base is at ${from})`);
    const replay = createReplay(text === undefined ? { apis: [], oauthServers: [] } : deserialize(basePath, text).defs);
    for (const record of parseJournal(lineBytes).records) {
      if ((record.seq as number) <= from) continue;
      if ((record.seq as number) > seq) break;
      replay.apply(record);
    }
    return replay.defs();
  }

  const lastSeqOf = (version: number) => lines.findLast((l) => l.entry.version === version)?.seq;
  /** Where line `seq` is in `lines`. */
  const indexOf = (seq: number): number => seq - (lines[0]?.seq ?? 0);
  /** Where line `i` starts in the journal. */
  const startOf = (i: number): number => lines[i]!.end - lines[i]!.bytes;

  /** Appends and a compaction's swap of the journal, one at a time. */
  const turn = createTurns();
  /** The compaction running beside the writes, if any. */
  let compacting: Promise<void> | undefined;

  /**
   * The first line of a kept entry becomes the base; the journal keeps the lines from it on. Only when
   * the lines it drops outgrow the base: each compaction then saves at least what it writes, and one
   * large write (PUT /config) does not cost a whole rewrite per later write until it is dropped.
   * Started here, it runs on after the write that called it; a write meanwhile starts none.
   */
  function startCompaction(keptSeqs: Set<number | undefined>): void {
    if (compacting) return;
    let first = -1;
    for (const seq of keptSeqs) if (seq !== undefined && (first === -1 || indexOf(seq) < first)) first = indexOf(seq);
    if (first === -1 || lines[first].seq === baseSeq || startOf(first) - startOf(0) <= Math.max(baseBytes, COMPACT_MIN_BYTES)) return;
    compacting = compact(lines[first])
      .catch((err) => logger.warn({ err, path: basePath }, 'config history compaction failed; the journal still holds every entry'))
      .finally(() => (compacting = undefined));
  }

  async function compact({ seq, entry, defs }: Line): Promise<void> {
    const content = defs ?? (await contentAt(seq));
    const base = `{"seq":${seq},${serialize(entry.version, content).slice(1)}`;
    await writeFileAtomic(basePath, base);
    baseBytes = base.length;
    await turn(async () => {
      // The lines after the new base's, including those appended since this compaction started.
      const from = lines.findIndex((l) => l.seq === seq);
      const start = lines[from].end;
      const after = (await readRange(journalPath, start, journal.size - start)) ?? Buffer.alloc(0);
      if (after.length !== journal.size - start) throw new Error(`${journalPath} is shorter than its lines`);
      // The base's own line keeps its entry, not its changes (the base holds them).
      const head = encodeRecord({ seq, ...entry }, { changes: [] });
      const headBytes = Buffer.byteLength(head);
      await writeFileAtomic(journalPath, head + after.toString('utf8'));
      baseSeq = seq;
      const shift = headBytes - start;
      lines = lines.slice(from).map((l, i) => ({ ...l, bytes: i === 0 ? headBytes : l.bytes, end: l.end + shift }));
      holding = lines.filter((l) => l.defs);
      await journal.close();
      journal = await openJournal(journalPath, headBytes + after.length);
    });
  }

  const backing: HistoryBacking = {
    async save(entry, defs, kept) {
      const previous = tip ?? (await contentAt(lines.at(-1)?.seq ?? baseSeq));
      const seq = (lines.at(-1)?.seq ?? baseSeq) + 1;
      const line = encodeRecord({ seq, ...entry }, changesBetween(previous, defs));
      await turn(async () => {
        await journal.append(line);
        const added: Line = { seq, entry, bytes: Buffer.byteLength(line), end: journal.size, defs };
        lines.push(added);
        holding.push(added);
      });
      tip = defs;
      const keptSeqs = new Set(kept.map((e) => lastSeqOf(e.version)));
      holding = holding.filter((l) => {
        if (keptSeqs.has(l.seq)) return true;
        l.defs = undefined;
        return false;
      });
      startCompaction(keptSeqs);
    },
    async load(version) {
      const line = lines.findLast((l) => l.entry.version === version);
      if (line === undefined) return undefined;
      try {
        return line.defs ?? (await contentAt(line.seq));
      } catch (err) {
        if (isFileSystemError(err)) throw err;
        logger.warn({ err, path: journalPath, version }, 'config history entry unreadable');
        return undefined;
      }
    },
    // Dropped entries' lines stay as steps towards later ones until the next compaction.
    async remove() {},
    adopt(state) {
      if (lines.at(-1)?.entry.hash === state.hash) tip = state.defs;
    },
  };

  if (legacy) {
    for (const entry of legacy) {
      const path = join(dir, `${entry.version}.json`);
      try {
        await backing.save(entry, deserialize(path, await readFile(path, 'utf8')).defs, []);
      } catch (err) {
        if (isFileSystemError(err)) throw err;
        logger.warn({ err, path }, 'previous config history entry unreadable; not converted');
      }
    }
    await rm(join(dir, LEGACY_INDEX), { force: true });
  }
  for (const file of await readdir(dir)) if (LEGACY_VERSION_FILE.test(file)) await rm(join(dir, file), { force: true });

  const latest = new Map(lines.map((l) => [l.entry.version, l.entry]));
  const initial = [...latest.values()].sort((a, b) => a.version - b.version).slice(-(options.limit ?? DEFAULT_HISTORY_LIMIT));
  const history = createHistory(backing, initial, options);
  let closing: Promise<void> | undefined;
  return {
    ...history,
    close: () =>
      (closing ??= (async () => {
        await history.close();
        await compacting;
        await journal.close();
      })()),
  };
}
