/**
 * Declarative configuration with history:
 *   GET  /config[?secrets=include]    the whole configuration (config-document.ts), secrets redacted
 *                                     unless an admin asks for them (logged: who, when; never what)
 *   PUT  /config[?dry_run=true]       replace it after validating the whole; dry run = the diff only
 *   GET  /config/history              the kept versions, newest first
 *   GET  /config/history/{version}    one kept version's configuration (secrets as GET /config)
 *   POST /config/rollback/{version}   restore one (a new version itself)
 */
import { Router, type Request, type Response } from 'express';
import { GatehouseError } from '#proto/errors';
import type { Definitions } from '#proto/definition/index';
import type { DefinitionStore } from '../store/index.js';
import type { ConfigHistory } from '../store/config-history.js';
import type { Logger } from '#proto/logger';
import { checkWholeConfig, diffDefinitions, parseConfigDocument, toConfigDocument, type ConfigDiff, type SecretsShown } from './config-document.js';
import type { AdminIdentity } from './admin-auth.js';
import { methodNotAllowed } from './error-handler.js';
import type { RecordedUpdate } from './recorded-update.js';

export interface ConfigRoutesOptions {
  store: DefinitionStore;
  history: ConfigHistory;
  update: RecordedUpdate;
  logger: Logger;
}

function dryRunOf(req: Request): boolean {
  const raw = req.query.dry_run;
  if (raw === undefined || raw === 'false') return false;
  if (raw === 'true' || raw === '') return true;
  throw new GatehouseError('VALIDATION_FAILED', 'dry_run must be "true" or "false"', { field: 'dry_run' });
}

function versionOf(req: Request): number {
  const raw = String(req.params.version);
  const version = /^\d{1,15}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(version)) throw new GatehouseError('CONFIG_VERSION_NOT_FOUND', 'config version not found');
  return version;
}

export function createConfigRoutes({ store, history, update, logger }: ConfigRoutesOptions): Router {
  const router = Router();

  /** `?secrets=include` (admins only, logged) or nothing: secrets are write-only unless an admin exports them on purpose. */
  function secretsShown(req: Request, res: Response, version: number): SecretsShown {
    const raw = req.query.secrets;
    if (raw === undefined) return 'redact';
    if (raw !== 'include') throw new GatehouseError('VALIDATION_FAILED', 'secrets must be "include" (or left out: secrets redacted)', { field: 'secrets' });
    const identity = res.locals.identity as AdminIdentity;
    if (identity.role !== 'admin') throw new GatehouseError('ADMIN_FORBIDDEN', 'only an admin may export secrets (secrets=include)');
    logger.warn({ user: identity.user, role: identity.role, path: req.path, version }, 'configuration exported with secrets');
    return 'include';
  }

  /**
   * `If-Match: "<version>"` (the ETag of GET /config): refused when the configuration is no longer that version, so a
   * read-modify-write does not undo a write made in between. Strong comparison (RFC 9110 §13.1.1); `*` always matches.
   */
  function requireVersion(req: Request): void {
    const header = req.get('if-match');
    if (header === undefined || header.trim() === '*') return;
    const now = `"${store.current().revision}"`;
    if (header.split(',').some((tag) => tag.trim() === now)) return;
    throw new GatehouseError('CONFIG_CHANGED', `the configuration is now version ${now}, not ${header.trim()}: nothing written; read it again`);
  }

  /** Replaces everything with `defs`; the diff is taken inside the write, against what it replaces. */
  async function replace(req: Request, res: Response, defs: Definitions, action?: string): Promise<{ version: number; changed: boolean; diff: ConfigDiff }> {
    let diff!: ConfigDiff;
    const result = await update(
      req,
      res,
      (before) => {
        // Inside the write: writes run one at a time, so no other one lands between this check and this write.
        requireVersion(req);
        diff = diffDefinitions(before, defs);
        return defs;
      },
      action,
    );
    return { version: result.revision, changed: result.changed, diff };
  }

  router
    .route('/config')
    .get((req, res) => {
      const { revision, defs } = store.current();
      res.set({ 'X-Snapshot-Version': String(revision), ETag: `"${revision}"` }).json(toConfigDocument(defs, secretsShown(req, res, revision)));
    })
    .put(async (req, res) => {
      const dryRun = dryRunOf(req);
      const current = store.current();
      const defs = await parseConfigDocument(req.body, current.defs);
      if (dryRun) {
        requireVersion(req);
        res.set('X-Snapshot-Version', String(current.revision)).json({ dry_run: true, version: current.revision, diff: diffDefinitions(current.defs, defs) });
        return;
      }
      res.json(await replace(req, res, defs));
    })
    .all(methodNotAllowed(['GET', 'HEAD', 'PUT']));

  router
    .route('/config/history')
    .get((_req, res) => {
      res.json(history.list());
    })
    .all(methodNotAllowed(['GET', 'HEAD']));

  const kept = async (req: Request): Promise<{ version: number; defs: Definitions }> => {
    const version = versionOf(req);
    const defs = await history.definitions(version);
    if (!defs) throw new GatehouseError('CONFIG_VERSION_NOT_FOUND', `config version ${version} is not in the history (the last ${history.limit} are kept)`);
    return { version, defs };
  };

  router
    .route('/config/history/:version')
    .get(async (req, res) => {
      // Who may see secrets is settled before whether the version is kept.
      const shown = secretsShown(req, res, versionOf(req));
      res.json(toConfigDocument((await kept(req)).defs, shown));
    })
    .all(methodNotAllowed(['GET', 'HEAD']));

  router
    .route('/config/rollback/:version')
    .post(async (req, res) => {
      const { version, defs } = await kept(req);
      // Valid when it was written; checked again in case this gateway's rules have changed since.
      checkWholeConfig(defs);
      res.json({ restored: version, ...(await replace(req, res, defs, `rollback to ${version}`)) });
    })
    .all(methodNotAllowed(['POST']));

  return router;
}
