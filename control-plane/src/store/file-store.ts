/**
 * Embedded definition store: DATA_DIR/store.json `{revision, apis, oauth_servers, basic_auth_credentials}`
 * (the last one only when there are basic_auth users: scrypt hashes, never passwords).
 * Updates are serialised through a promise queue, so each mutation sees the result of the
 * previous one; a write is on disk (fsynced, renamed) before update() resolves.
 */
import { constants } from 'node:fs';
import { access, mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { GatehouseError } from '#proto/errors';
import { parseApiDefinition, parseBasicAuthCredential, parseOAuthServer, type Definitions } from '#proto/definition/index';
import { definitionsHash } from '#proto/snapshot/codec';
import type { Logger } from '#proto/logger';
import { removeAbandonedTemps, writeFileAtomic } from './atomic-file.js';
import type { DefinitionStore, Mutation, StoreState, UpdateResult } from './index.js';
import { createUpdateQueue } from './update-queue.js';

export const STORE_FILE = 'store.json';

/** A fresh store starts at revision 1 so that version 0 always means "no snapshot" on the wire. */
const FIRST_REVISION = 1;

interface StoreFile {
  revision: number;
  apis: unknown[];
  oauth_servers: unknown[];
  basic_auth_credentials?: unknown[];
}

export interface FileStoreOptions {
  dataDir: string;
  logger: Logger;
}

/**
 * Each definition's JSON, kept per (never mutated) definition object: a write then stringifies only
 * what it changed (10,000 APIs: JSON.stringify of all of them was ~65 ms of every write, and the
 * config history writes the same text again).
 */
const definitionJson = new WeakMap<object, string>();

function jsonList(items: readonly object[]): string {
  return `[${items
    .map((item) => {
      let json = definitionJson.get(item);
      if (json === undefined) definitionJson.set(item, (json = JSON.stringify(item)));
      return json;
    })
    .join(',')}]`;
}

/** The same text as JSON.stringify of StoreFile (the format is unchanged), built from the per-definition JSON. */
export function serialize(revision: number, defs: Definitions): string {
  const credentials = defs.basicAuthCredentials ?? [];
  const users = credentials.length > 0 ? `,"basic_auth_credentials":${jsonList(credentials)}` : '';
  return `{"revision":${JSON.stringify(revision)},"apis":${jsonList(defs.apis)},"oauth_servers":${jsonList(defs.oauthServers)}${users}}\n`;
}

/** Re-validates what is on disk, so a hand-edited file cannot smuggle in an invalid definition. */
export function deserialize(path: string, text: string): { revision: number; defs: Definitions } {
  try {
    const raw = JSON.parse(text) as Partial<StoreFile> | null;
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new Error('not a JSON object {revision, apis, oauth_servers}');
    if (!Number.isSafeInteger(raw.revision) || (raw.revision as number) < 0) throw new Error('revision is not an integer');
    if (!Array.isArray(raw.apis) || !Array.isArray(raw.oauth_servers)) throw new Error('apis and oauth_servers must be arrays');
    const credentials = raw.basic_auth_credentials ?? [];
    if (!Array.isArray(credentials)) throw new Error('basic_auth_credentials must be an array');
    return {
      revision: raw.revision as number,
      defs: {
        apis: raw.apis.map(parseApiDefinition),
        oauthServers: raw.oauth_servers.map(parseOAuthServer),
        basicAuthCredentials: credentials.map(parseBasicAuthCredential),
      },
    };
  } catch (err) {
    throw new GatehouseError('STORE_UNAVAILABLE', `cannot load ${path}: ${(err as Error).message}`, { cause: err });
  }
}

function unavailable(err: unknown): GatehouseError {
  return new GatehouseError('STORE_UNAVAILABLE', 'definition store unavailable', { cause: err });
}

export async function openFileStore({ dataDir, logger }: FileStoreOptions): Promise<DefinitionStore> {
  const path = join(dataDir, STORE_FILE);
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  await removeAbandonedTemps(path);

  let loaded: { revision: number; defs: Definitions };
  try {
    loaded = deserialize(path, await readFile(path, 'utf8'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    loaded = { revision: FIRST_REVISION, defs: { apis: [], oauthServers: [] } };
    await writeFileAtomic(path, serialize(loaded.revision, loaded.defs));
  }

  let state: StoreState = Object.freeze({ ...loaded, hash: definitionsHash(loaded.defs) });
  const queue = createUpdateQueue(logger);
  logger.info({ path, revision: state.revision, apis: state.defs.apis.length }, 'definition store loaded');

  async function apply(mutation: Mutation): Promise<UpdateResult> {
    const defs = await mutation(state.defs);
    const hash = definitionsHash(defs);
    if (hash === state.hash) return { ...state, changed: false };
    const revision = state.revision + 1;
    try {
      await writeFileAtomic(path, serialize(revision, defs));
    } catch (err) {
      throw unavailable(err);
    }
    state = Object.freeze({ revision, defs, hash });
    queue.notify(state);
    return { ...state, changed: true };
  }

  return {
    current: () => state,

    update: (mutation) => queue.update(() => apply(mutation)),
    subscribe: queue.subscribe,

    async checkReady() {
      try {
        // The file is replaced by rename, so the directory must be writable too.
        await access(dataDir, constants.W_OK | constants.X_OK);
        await access(path, constants.R_OK);
      } catch (err) {
        throw unavailable(err);
      }
    },

    close: queue.close,
  };
}
