/**
 * CRUD routes for /apis, /oauth/servers, /credentials/basic_auth and /credentials/key_auth. Every write runs inside store.update(), so the
 * checks in definition-writes.ts see the latest state; the response is sent after the write
 * is durable and carries the snapshot version that includes it.
 */
import { Router, type Request, type Response } from 'express';
import type { Definitions } from '#proto/definition/index';
import { redactSecrets } from '#proto/definition/secret-fields';
import type { DefinitionStore } from '../store/index.js';
import {
  apiKind,
  createDefinition,
  deleteDefinition,
  findDefinition,
  oauthServerKind,
  requireObject,
  updateDefinition,
  type DefinitionKind,
  type WriteResult,
} from './definition-writes.js';
import { methodNotAllowed } from './error-handler.js';
import { basicAuthCredentialKind, keyAuthCredentialKind } from './credential-kinds.js';
import type { RecordedUpdate } from './recorded-update.js';
import { nextLink, pageOf, pageRequestOf } from './pagination.js';

function resourceRoutes<T>(router: Router, store: DefinitionStore, update: RecordedUpdate, path: string, kind: DefinitionKind<T>): void {
  /** What the response shows: the kind's view of the stored definition, secrets redacted, and what the write reveals once. */
  const present = (item: T, reveal?: Record<string, unknown>) => {
    const shown = redactSecrets(kind.compileKind, kind.present ? kind.present(item) : item);
    return reveal ? { ...(shown as object), ...reveal } : shown;
  };
  const prepared = async (body: unknown, op: 'create' | 'update'): Promise<{ body: unknown; reveal?: Record<string, unknown> }> =>
    kind.prepare ? kind.prepare(requireObject(body), op) : { body };

  /** Runs a write through the store (and the history); the mutation's value is captured for the response. */
  async function write<V>(req: Request, res: Response, mutate: (defs: Definitions) => WriteResult<V>): Promise<V> {
    let value!: V;
    await update(req, res, (defs) => {
      const out = mutate(defs);
      value = out.value;
      return out.defs;
    });
    return value;
  }

  router
    .route(path)
    .get((req, res) => {
      const list = kind.list(store.current().defs);
      const page = pageRequestOf(req.query);
      if (!page) {
        res.json(list.map((item) => present(item)));
        return;
      }
      const { items, next } = pageOf(list, kind.nameOf, page);
      res.set('X-Total-Count', String(list.length));
      if (next !== null) res.set('Link', nextLink(path, page, next));
      res.json(items.map((item) => present(item)));
    })
    .post(async (req, res) => {
      const { body, reveal } = await prepared(req.body, 'create');
      const created = await write(req, res, (defs) => createDefinition(kind, defs, body));
      res
        .status(201)
        .location(`${path}/${encodeURIComponent(kind.nameOf(created))}`)
        .json(present(created, reveal));
    })
    .all(methodNotAllowed(['GET', 'HEAD', 'POST']));

  const put = async (req: Request<{ name: string }>, res: Response) => {
    const { body, reveal } = await prepared(req.body, 'update');
    res.json(present(await write(req, res, (defs) => updateDefinition(kind, defs, req.params.name, body)), reveal));
  };

  router
    .route(`${path}/:name`)
    .get((req, res) => {
      res.json(present(findDefinition(kind, store.current().defs, req.params.name)));
    })
    .put(put)
    .patch(put)
    .delete(async (req, res) => {
      await write(req, res, (defs) => ({ defs: deleteDefinition(kind, defs, req.params.name), value: null }));
      res.status(204).end();
    })
    .all(methodNotAllowed(['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE']));
}

export function createDefinitionRoutes(store: DefinitionStore, update: RecordedUpdate): Router {
  const router = Router();
  resourceRoutes(router, store, update, '/apis', apiKind);
  resourceRoutes(router, store, update, '/oauth/servers', oauthServerKind);
  resourceRoutes(router, store, update, '/credentials/basic_auth', basicAuthCredentialKind);
  resourceRoutes(router, store, update, '/credentials/key_auth', keyAuthCredentialKind);
  return router;
}
