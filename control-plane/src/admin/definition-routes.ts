/**
 * CRUD routes for /apis, /oauth/servers and /credentials/basic_auth. Every write runs inside store.update(), so the
 * checks in definition-writes.ts see the latest state; the response is sent after the write
 * is durable and carries the snapshot version that includes it.
 */
import { Router, type Response } from 'express';
import type { Definitions } from '#proto/definition/index';
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
import { basicAuthCredentialKind } from './basic-auth-credentials.js';

function resourceRoutes<T>(router: Router, store: DefinitionStore, path: string, kind: DefinitionKind<T>): void {
  const present = (item: T) => (kind.present ? kind.present(item) : item);
  const prepared = (body: unknown, op: 'create' | 'update') => (kind.prepare ? kind.prepare(requireObject(body), op) : body);

  /** Runs a write through the store; the mutation's value is captured for the response. */
  async function write<V>(res: Response, mutate: (defs: Definitions) => WriteResult<V>): Promise<V> {
    let value!: V;
    const result = await store.update((defs) => {
      const out = mutate(defs);
      value = out.value;
      return out.defs;
    });
    res.set('X-Snapshot-Version', String(result.revision));
    return value;
  }

  router
    .route(path)
    .get((_req, res) => {
      res.json(kind.list(store.current().defs).map(present));
    })
    .post(async (req, res) => {
      const body = await prepared(req.body, 'create');
      const created = await write(res, (defs) => createDefinition(kind, defs, body));
      res.status(201).location(`${path}/${encodeURIComponent(kind.nameOf(created))}`).json(present(created));
    })
    .all(methodNotAllowed(['GET', 'HEAD', 'POST']));

  const update = async (req: { params: { name: string }; body: unknown }, res: Response) => {
    const body = await prepared(req.body, 'update');
    res.json(present(await write(res, (defs) => updateDefinition(kind, defs, req.params.name, body))));
  };

  router
    .route(`${path}/:name`)
    .get((req, res) => {
      res.json(present(findDefinition(kind, store.current().defs, req.params.name)));
    })
    .put(update)
    .patch(update)
    .delete(async (req, res) => {
      await write(res, (defs) => ({ defs: deleteDefinition(kind, defs, req.params.name), value: null }));
      res.status(204).end();
    })
    .all(methodNotAllowed(['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE']));
}

export function createDefinitionRoutes(store: DefinitionStore): Router {
  const router = Router();
  resourceRoutes(router, store, '/apis', apiKind);
  resourceRoutes(router, store, '/oauth/servers', oauthServerKind);
  resourceRoutes(router, store, '/credentials/basic_auth', basicAuthCredentialKind);
  return router;
}
