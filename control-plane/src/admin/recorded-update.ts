/**
 * Every admin write goes through here: store.update(), the `X-Snapshot-Version` of the result, and
 * a config-history entry for a write that changed something (who: the token's user; what: method
 * and path, or the caller's own words such as `rollback to 12`).
 */
import type { Request, Response } from 'express';
import type { Logger } from '#proto/logger';
import type { Definitions } from '#proto/definition/index';
import { definitionsHash } from '#proto/snapshot/codec';
import type { DefinitionStore, Mutation, UpdateResult } from '../store/index.js';
import type { ConfigHistory } from '../store/config-history.js';
import type { AdminIdentity } from './admin-auth.js';

export type RecordedUpdate = (req: Request, res: Response, mutation: Mutation, action?: string) => Promise<UpdateResult>;

/** requireAdmin leaves the verified identity here. */
export function identityOf(res: Response): AdminIdentity | undefined {
  return res.locals.identity as AdminIdentity | undefined;
}

/** `versionOf`: the snapshot version serving a store revision (they differ once Service endpoints changed). */
export function createRecordedUpdate(
  store: DefinitionStore,
  history: ConfigHistory,
  logger: Logger,
  versionOf = (revision: number) => revision,
): RecordedUpdate {
  return async (req, res, mutation, action) => {
    let written!: Definitions;
    const result = await store.update(async (current) => (written = await mutation(current)));
    res.set('X-Snapshot-Version', String(versionOf(result.revision)));
    if (!result.changed) return result;
    const origin = { author: identityOf(res)?.user ?? 'unknown', action: action ?? `${req.method} ${req.path}`, user_agent: req.get('user-agent') };
    try {
      // What was written: the Kubernetes store may not have accepted all of it yet when the write returns.
      await history.record({ revision: result.revision, defs: written, hash: definitionsHash(written) }, origin);
    } catch (err) {
      // The write itself is durable and served; only its history entry is missing.
      logger.error({ err, version: result.revision }, 'config history entry could not be written');
    }
    return result;
  };
}
