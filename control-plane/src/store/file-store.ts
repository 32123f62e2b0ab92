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
import type { DefinitionStore, Mutation, StoreListener, StoreState, UpdateResult } from './index.js';

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

export function serialize(revision: number, defs: Definitions): string {
  const credentials = defs.basicAuthCredentials ?? [];
  const file: StoreFile = { revision, apis: defs.apis, oauth_servers: defs.oauthServers, ...(credentials.length > 0 ? { basic_auth_credentials: credentials } : {}) };
  return `${JSON.stringify(file)}\n`;
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
  let tail: Promise<unknown> = Promise.resolve();
  let closed = false;
  const listeners = new Set<StoreListener>();
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
    for (const listener of listeners) {
      try {
        listener(state);
      } catch (err) {
        logger.error({ err }, 'store listener failed');
      }
    }
    return { ...state, changed: true };
  }

  return {
    current: () => state,

    update(mutation) {
      if (closed) return Promise.reject(new GatehouseError('STORE_UNAVAILABLE', 'definition store is closed'));
      const result = tail.then(() => apply(mutation));
      tail = result.catch(() => undefined);
      return result;
    },

    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },

    async checkReady() {
      try {
        // The file is replaced by rename, so the directory must be writable too.
        await access(dataDir, constants.W_OK | constants.X_OK);
        await access(path, constants.R_OK);
      } catch (err) {
        throw unavailable(err);
      }
    },

    async close() {
      closed = true;
      await tail;
      listeners.clear();
    },
  };
}
