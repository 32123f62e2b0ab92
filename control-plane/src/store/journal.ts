/**
 * Append-only journals of definition changes, shared by the file store (DATA_DIR/store.journal) and
 * the file config history (DATA_DIR/history/journal): one JSON line per write, holding the record's
 * own members (revision and hash; a history entry) plus what the write changed per definition, so a
 * write costs what it changes instead of a whole copy of the configuration.
 *
 * Line: `{...head, "changes": [{"kind": "api", "name": "a", "def": {...}}, {"kind": "api", "name": "b"}], "order"?: {"api": [names]}}`,
 * `def` absent = removed. Replaying changes onto a Definitions keeps the order of unchanged
 * definitions, replaces a changed one in place and appends a new one; `order` (only when a write
 * reordered a kind, e.g. PUT /config) gives that kind's whole order, so a replay restores the lists
 * exactly as they were written.
 */
import { constants, fstatSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import type { DefinitionKindName } from '#proto/compile/index';
import type { DefinitionChange } from '#proto/compile/incremental';
import type { Definitions } from '#proto/definition/index';
import { editsFrom } from '#proto/snapshot/codec';
import { storedApis, storedBasicAuthCredentials, storedKeyAuthCredentials, storedOAuthServers, type StoredKind } from './definition-kinds.js';

const KINDS = [storedApis, storedOAuthServers, storedBasicAuthCredentials, storedKeyAuthCredentials] as StoredKind<object>[];
const KIND_BY_NAME = new Map(KINDS.map((kind) => [kind.compileKind, kind]));

/**
 * Each definition's JSON, kept per (never mutated) definition object: a write then stringifies only
 * what it changed, not the whole configuration.
 */
const jsonOf = new WeakMap<object, string>();

export function definitionJson(def: object): string {
  let json = jsonOf.get(def);
  if (json === undefined) jsonOf.set(def, (json = JSON.stringify(def)));
  return json;
}

export interface DefinitionChanges {
  changes: DefinitionChange[];
  /** Per kind a write reordered: every name in the written order. */
  order?: Partial<Record<DefinitionKindName, string[]>>;
}

/**
 * The last diff per resulting Definitions (never mutated): the store and the history diff the same pair once.
 * `before` is weak: held strongly, each version's entry would keep the one before it, whose entry keeps the one
 * before that, so the current configuration would keep every version since the start.
 */
const lastDiff = new WeakMap<Definitions, { before: WeakRef<Definitions>; changes: DefinitionChanges }>();

/**
 * What turns `before` into `after`, per name: identity tells unchanged definitions apart, and a new
 * object with the same JSON is unchanged too (what a reload yields is the same either way).
 */
export function changesBetween(before: Definitions, after: Definitions): DefinitionChanges {
  const known = lastDiff.get(after);
  if (known?.before.deref() === before) return known.changes;
  const result = changesFromEdits(before, after) ?? diffLists(before, after);
  lastDiff.set(after, { before: new WeakRef(before), changes: result });
  return result;
}

/**
 * What an admin write told the codec it did (deriveDefinitions): replaced in place, appended or filtered
 * out, each of which a replay repeats, so no pass over the lists (the in-step walk below grows with the
 * configuration). null when `after` was not made so from `before`.
 */
function changesFromEdits(before: Definitions, after: Definitions): DefinitionChanges | null {
  const edits = editsFrom(before, after);
  if (!edits) return null;
  const changes: DefinitionChange[] = [];
  for (const edit of edits) {
    const kind = KIND_BY_NAME.get(edit.kind);
    if (!kind) return null;
    const name = kind.nameOf(edit.after ?? edit.before!);
    // A rename is not what these writes make: the whole diff tells it apart.
    if (edit.before && edit.after && kind.nameOf(edit.before) !== name) return null;
    if (!edit.after) changes.push({ kind: edit.kind, name });
    else if (!edit.before || definitionJson(edit.before) !== definitionJson(edit.after)) changes.push({ kind: edit.kind, name, def: edit.after });
  }
  return { changes };
}

function diffLists(before: Definitions, after: Definitions): DefinitionChanges {
  const result: DefinitionChanges = { changes: [] };
  for (const kind of KINDS) {
    const old = kind.list(before);
    const now = kind.list(after);
    if (old === now) continue;
    // In step while the names line up (the usual write replaces one in place or appends): far cheaper than
    // the map of names below.
    let from = 0;
    for (; from < old.length && from < now.length; from++) {
      if (old[from] === now[from]) continue;
      const name = kind.nameOf(now[from]);
      if (kind.nameOf(old[from]) !== name) break;
      if (definitionJson(old[from]) !== definitionJson(now[from])) result.changes.push({ kind: kind.compileKind, name, def: now[from] });
    }
    // The rest by name (names are unique per kind, so none of them is in the part walked in step).
    const position = new Map<string, number>();
    for (let i = from; i < old.length; i++) position.set(kind.nameOf(old[i]), i);
    const kept = new Uint8Array(old.length - from);
    let last = -1;
    let added = false;
    let inReplayOrder = true;
    for (let k = from; k < now.length; k++) {
      const def = now[k];
      const name = kind.nameOf(def);
      const i = position.get(name);
      if (i === undefined) {
        added = true;
        result.changes.push({ kind: kind.compileKind, name, def });
        continue;
      }
      // A replay keeps old positions and appends new names: anything else needs the order written down.
      if (added || i < last) inReplayOrder = false;
      last = i;
      kept[i - from] = 1;
      if (old[i] !== def && definitionJson(old[i]) !== definitionJson(def)) result.changes.push({ kind: kind.compileKind, name, def });
    }
    for (let i = from; i < old.length; i++) if (!kept[i - from]) result.changes.push({ kind: kind.compileKind, name: kind.nameOf(old[i]) });
    if (!inReplayOrder) (result.order ??= {})[kind.compileKind] = now.map((def) => kind.nameOf(def));
  }
  return result;
}

/** One journal line (with its newline), `head` first; definitions as their kept JSON. */
export function encodeRecord(head: object, { changes, order }: DefinitionChanges): string {
  const items = changes.map(
    ({ kind, name, def }) => `{"kind":${JSON.stringify(kind)},"name":${JSON.stringify(name)}${def ? `,"def":${definitionJson(def)}` : ''}}`,
  );
  return `${JSON.stringify(head).slice(0, -1)},"changes":[${items.join(',')}]${order ? `,"order":${JSON.stringify(order)}` : ''}}\n`;
}

export interface JournalLines {
  /** Parsed records, in file order. */
  records: Array<Record<string, unknown>>;
  /** Byte offset just past each record's newline. */
  ends: number[];
  /** Bytes of the complete records; anything after them is a torn last record. */
  validBytes: number;
  /** The torn last record's bytes (a crash in the middle of its append), 0 when there is none. */
  tornBytes: number;
}

/**
 * Splits a journal into records. Only the last one may be torn (cut short or not JSON: the append
 * that a crash interrupted was never acknowledged); a damaged record before it throws.
 */
export function parseJournal(bytes: Buffer): JournalLines {
  const records: Array<Record<string, unknown>> = [];
  const ends: number[] = [];
  let start = 0;
  while (start < bytes.length) {
    const end = bytes.indexOf(0x0a, start);
    let record: unknown;
    try {
      record = end === -1 ? undefined : JSON.parse(bytes.toString('utf8', start, end));
    } catch {
      record = undefined;
    }
    if (record === null || typeof record !== 'object' || Array.isArray(record)) {
      if (end === -1 || end === bytes.length - 1) break;
      throw new Error(`record ${records.length + 1} (at byte ${start}) is not a JSON object`);
    }
    records.push(record as Record<string, unknown>);
    start = end + 1;
    ends.push(start);
  }
  return { records, ends, validBytes: start, tornBytes: bytes.length - start };
}

/** Applies records' changes to a Definitions, each definition re-validated like store.json's. */
export interface Replay {
  /** Throws (message says what is wrong) on a record that is not a list of valid changes. */
  apply(record: Record<string, unknown>): void;
  defs(): Definitions;
}

export function createReplay(start: Definitions): Replay {
  const lists = new Map(KINDS.map((kind) => [kind.compileKind, new Map(kind.list(start).map((def) => [kind.nameOf(def), def]))]));
  return {
    apply(record) {
      const { changes, order } = record;
      if (!Array.isArray(changes)) throw new Error('changes is not an array');
      for (const change of changes as Array<Partial<Record<string, unknown>>>) {
        const kind = KIND_BY_NAME.get(change?.kind as DefinitionKindName);
        if (!kind || typeof change.name !== 'string') throw new Error('a change without a known kind and a name');
        const list = lists.get(kind.compileKind)!;
        if (change.def === undefined) {
          list.delete(change.name);
          continue;
        }
        const def = kind.parse(change.def);
        if (kind.nameOf(def) !== change.name) throw new Error(`${change.kind} "${change.name}" holds a definition named "${kind.nameOf(def)}"`);
        list.set(change.name, def);
      }
      if (order === undefined) return;
      for (const [kindName, names] of Object.entries(order as object)) {
        const list = lists.get(kindName as DefinitionKindName);
        if (!list || !Array.isArray(names) || names.length !== list.size || names.some((n) => !list.has(n)))
          throw new Error(`order of ${kindName} does not name its definitions`);
        lists.set(kindName as DefinitionKindName, new Map(names.map((n: string) => [n, list.get(n)!])));
      }
    },
    defs: () => KINDS.reduce((defs, kind) => kind.withList(defs, [...lists.get(kind.compileKind)!.values()]), { apis: [], oauthServers: [] } as Definitions),
  };
}

/** A journal file open for appending: each append is on disk (O_DSYNC) when it resolves. */
export interface JournalFile {
  /** Bytes in the file. */
  readonly size: number;
  append(text: string): Promise<void>;
  /** Empties the file (after a compaction: what it held is in the base now). */
  truncate(): Promise<void>;
  close(): Promise<void>;
}

/** Opens (creating it when absent) `path`; `size` is the file's current length, e.g. after cutting a torn record. */
export async function openJournal(path: string, size: number): Promise<JournalFile> {
  // O_DSYNC: a write returns once its data is on disk, as write + fdatasync would, in one trip through
  // libuv's thread pool instead of two.
  const fh: FileHandle = await open(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_DSYNC, 0o600);
  await fh.truncate(size);
  let bytes = size;
  /** Set when a failed append could not be cut off again: appending after it would bury a damaged record. */
  let broken: Error | undefined;
  return {
    get size() {
      return bytes;
    },
    async append(text) {
      if (broken) throw broken;
      // An open descriptor keeps writing to a file that was deleted: refuse instead of acknowledging a lost write.
      // fstat of an open descriptor does not wait on the disk: called directly, not through the pool.
      if (fstatSync(fh.fd).nlink === 0) throw new Error(`${path} was removed`);
      const data = Buffer.from(text);
      try {
        for (let written = 0; written < data.length; ) written += (await fh.write(data, written)).bytesWritten;
      } catch (err) {
        await fh.truncate(bytes).catch((cut: Error) => (broken = cut));
        throw err;
      }
      bytes += data.length;
    },
    async truncate() {
      await fh.truncate(0);
      bytes = 0;
      broken = undefined;
    },
    close: () => fh.close(),
  };
}
