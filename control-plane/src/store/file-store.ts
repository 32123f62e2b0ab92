/**
 * Embedded definition store, two files in DATA_DIR:
 * - store.json `{revision, apis, oauth_servers, basic_auth_credentials, key_auth_credentials}` (each
 *   credential list only when there are any: scrypt hashes and SHA-256 digests, never passwords or
 *   keys): the base, the whole content at its
 *   revision, only ever replaced atomically (atomic-file.ts);
 * - store.journal: one line per write since (journal.ts: revision, hash and the definitions the
 *   write changed), appended and fdatasynced before update() resolves.
 * The content is the base plus the journal's records above the base's revision. Compaction writes
 * the whole content as the new base, then empties the journal: a crash between the two leaves records
 * the base already holds, which a load skips by their revision. It runs at start (when the journal
 * holds anything) and when the journal outgrows the base, after the write that crossed the bound was
 * acknowledged and published (the next write waits for it).
 * Updates are serialised through a promise queue, so each mutation sees the result of the previous one.
 */
import { constants } from 'node:fs';
import { access, mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { GatehouseError } from '#proto/errors';
import { parseApiDefinition, parseOAuthServer, type Definitions } from '#proto/definition/index';
import { storedBasicAuthCredentials, storedKeyAuthCredentials, type StoredKind } from './definition-kinds.js';
import { definitionsHash } from '#proto/snapshot/codec';
import type { Logger } from '#proto/logger';
import { removeAbandonedTemps, syncDir, writeFileAtomic } from './atomic-file.js';
import type { DefinitionStore, Mutation, StoreState, UpdateResult } from './index.js';
import { changesBetween, createReplay, definitionJson, encodeRecord, openJournal, parseJournal, type Replay } from './journal.js';
import { createUpdateQueue } from './update-queue.js';

export const STORE_FILE = 'store.json';
export const JOURNAL_FILE = 'store.journal';

/**
 * A journal smaller than this is never compacted: rewriting a small base after every few writes
 * would cost more fsyncs than the replay it saves.
 */
const COMPACT_MIN_BYTES = 64 * 1024;

/** A fresh store starts at revision 1 so that version 0 always means "no snapshot" on the wire. */
const FIRST_REVISION = 1;

interface StoreFile {
  revision: number;
  apis: unknown[];
  oauth_servers: unknown[];
  basic_auth_credentials?: unknown[];
  key_auth_credentials?: unknown[];
}

/** The optional members of store.json: the credential kinds, each written only when it has any (older files stay as they were). */
const CREDENTIAL_MEMBERS: ReadonlyArray<{ member: 'basic_auth_credentials' | 'key_auth_credentials'; kind: StoredKind<object> }> = [
  { member: 'basic_auth_credentials', kind: storedBasicAuthCredentials as StoredKind<object> },
  { member: 'key_auth_credentials', kind: storedKeyAuthCredentials as StoredKind<object> },
];

export interface FileStoreOptions {
  dataDir: string;
  logger: Logger;
}

const jsonList = (items: readonly object[]): string => `[${items.map(definitionJson).join(',')}]`;

/** The same text as JSON.stringify of StoreFile (the format is unchanged), built from the per-definition JSON. */
export function serialize(revision: number, defs: Definitions): string {
  const credentials = CREDENTIAL_MEMBERS.map(({ member, kind }) => {
    const list = kind.list(defs);
    return list.length > 0 ? `,"${member}":${jsonList(list)}` : '';
  });
  return `{"revision":${JSON.stringify(revision)},"apis":${jsonList(defs.apis)},"oauth_servers":${jsonList(defs.oauthServers)}${credentials.join('')}}\n`;
}

/** Re-validates what is on disk, so a hand-edited file cannot smuggle in an invalid definition. */
export function deserialize(path: string, text: string): { revision: number; defs: Definitions } {
  try {
    const raw = JSON.parse(text) as Partial<StoreFile> | null;
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new Error('not a JSON object {revision, apis, oauth_servers}');
    if (!Number.isSafeInteger(raw.revision) || (raw.revision as number) < 0) throw new Error('revision is not an integer');
    if (!Array.isArray(raw.apis) || !Array.isArray(raw.oauth_servers)) throw new Error('apis and oauth_servers must be arrays');
    let defs: Definitions = { apis: raw.apis.map(parseApiDefinition), oauthServers: raw.oauth_servers.map(parseOAuthServer) };
    for (const { member, kind } of CREDENTIAL_MEMBERS) {
      const credentials = raw[member] ?? [];
      if (!Array.isArray(credentials)) throw new Error(`${member} must be an array`);
      defs = kind.withList(defs, credentials.map(kind.parse));
    }
    return { revision: raw.revision as number, defs };
  } catch (err) {
    throw new GatehouseError('STORE_UNAVAILABLE', `cannot load ${path}: ${(err as Error).message}`, { cause: err });
  }
}

function unavailable(err: unknown): GatehouseError {
  return new GatehouseError('STORE_UNAVAILABLE', 'definition store unavailable', { cause: err });
}

async function readIfExists(path: string): Promise<Buffer | undefined> {
  try {
    return await readFile(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new GatehouseError('STORE_UNAVAILABLE', `cannot load ${path}: ${(err as Error).message}`, { cause: err });
  }
}

interface Loaded {
  revision: number;
  defs: Definitions;
  hash: string;
}

/**
 * The base plus the journal's records above its revision, each definition re-validated. A torn last
 * record is dropped with a warning; any other damage, a gap in the revisions or a result that does not
 * hash to the last record's hash is STORE_UNAVAILABLE naming the journal.
 */
export function replayJournal(path: string, base: { revision: number; defs: Definitions }, bytes: Buffer, logger: Logger): Loaded & { validBytes: number } {
  try {
    const { records, validBytes, tornBytes } = parseJournal(bytes);
    if (tornBytes > 0) logger.warn({ path, bytes: tornBytes }, 'dropped the torn last journal record (an append cut short by a crash: never acknowledged)');
    let replay: Replay | undefined;
    let revision = base.revision;
    let hash: unknown;
    for (const [i, record] of records.entries()) {
      const at = record.revision as number;
      if (!Number.isSafeInteger(at)) throw new Error(`record ${i + 1} has no revision`);
      // Already in the base: a crash between a compaction's base write and its emptying of the journal.
      if (at <= base.revision) continue;
      if (at !== revision + 1) throw new Error(`record ${i + 1} is revision ${at}, expected ${revision + 1} (store.json is at ${base.revision})`);
      try {
        (replay ??= createReplay(base.defs)).apply(record);
      } catch (err) {
        throw new Error(`record ${i + 1} (revision ${at}): ${(err as Error).message}`, { cause: err });
      }
      revision = at;
      hash = record.hash;
    }
    const defs = replay ? replay.defs() : base.defs;
    const loaded = { revision, defs, hash: definitionsHash(defs), validBytes };
    if (replay && loaded.hash !== hash) {
      throw new Error(
        `the content at revision ${revision} hashes to ${loaded.hash}, its record says ${JSON.stringify(hash)}: the journal does not continue store.json (replaced by hand? see docs/operations.md "Reliability")`,
      );
    }
    return loaded;
  } catch (err) {
    throw new GatehouseError('STORE_UNAVAILABLE', `cannot load ${path}: ${(err as Error).message}`, { cause: err });
  }
}

/** What a start would load from `dataDir` (store.json plus its journal), read only: for tests and inspection. */
export async function readStoredContent(dataDir: string, logger: Logger): Promise<Loaded> {
  const path = join(dataDir, STORE_FILE);
  const base = deserialize(path, await readFile(path, 'utf8'));
  const journalPath = join(dataDir, JOURNAL_FILE);
  const { validBytes: _, ...loaded } = replayJournal(journalPath, base, (await readIfExists(journalPath)) ?? Buffer.alloc(0), logger);
  return loaded;
}

export async function openFileStore({ dataDir, logger }: FileStoreOptions): Promise<DefinitionStore> {
  const path = join(dataDir, STORE_FILE);
  const journalPath = join(dataDir, JOURNAL_FILE);
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  await removeAbandonedTemps(path);

  const baseText = (await readIfExists(path))?.toString('utf8');
  const base = baseText === undefined ? { revision: FIRST_REVISION, defs: { apis: [], oauthServers: [] } } : deserialize(path, baseText);
  let baseBytes = baseText?.length ?? 0;
  if (baseText === undefined) {
    const text = serialize(base.revision, base.defs);
    await writeFileAtomic(path, text);
    baseBytes = text.length;
  }
  const journalBytes = await readIfExists(journalPath);
  const { validBytes, ...loaded } = replayJournal(journalPath, base, journalBytes ?? Buffer.alloc(0), logger);
  const journal = await openJournal(journalPath, validBytes);
  if (!journalBytes) await syncDir(dataDir);

  let state: StoreState = Object.freeze(loaded);
  const queue = createUpdateQueue(logger);
  let compacting: Promise<void> = Promise.resolve();

  /** Never fails: until a compaction succeeds, the journal keeps growing and still holds every write. */
  async function compact(at: StoreState): Promise<void> {
    try {
      const text = serialize(at.revision, at.defs);
      await writeFileAtomic(path, text);
      baseBytes = text.length;
      await journal.truncate();
    } catch (err) {
      logger.warn({ err, path }, 'store compaction failed; the journal still holds every write');
    }
  }

  if (journal.size > 0 || (journalBytes?.length ?? 0) > 0) await compact(state);
  logger.info({ path, revision: state.revision, apis: state.defs.apis.length }, 'definition store loaded');

  async function apply(mutation: Mutation): Promise<UpdateResult> {
    await compacting;
    const defs = await mutation(state.defs);
    const hash = definitionsHash(defs);
    if (hash === state.hash) return { ...state, changed: false };
    const revision = state.revision + 1;
    try {
      await journal.append(encodeRecord({ revision, hash }, changesBetween(state.defs, defs)));
    } catch (err) {
      throw unavailable(err);
    }
    state = Object.freeze({ revision, defs, hash });
    queue.notify(state);
    if (journal.size > Math.max(baseBytes, COMPACT_MIN_BYTES)) compacting = compact(state);
    return { ...state, changed: true };
  }

  let closing: Promise<void> | undefined;
  return {
    current: () => state,

    update: (mutation) => queue.update(() => apply(mutation)),
    subscribe: queue.subscribe,

    async checkReady() {
      try {
        // The base is replaced by rename, so the directory must be writable too.
        await access(dataDir, constants.W_OK | constants.X_OK);
        await access(path, constants.R_OK);
        await access(journalPath, constants.W_OK);
      } catch (err) {
        throw unavailable(err);
      }
    },

    close: () =>
      (closing ??= (async () => {
        await queue.close();
        await compacting;
        await journal.close();
      })()),
  };
}
