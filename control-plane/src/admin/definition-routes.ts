/**
 * CRUD routes for /apis and /oauth/servers. Every write runs inside store.update(), so the
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
  updateDefinition,
  type DefinitionKind,
  type WriteResult,
} from './definition-writes.js';
import { methodNotAllowed } from './error-handler.js';

function resourceRoutes<T extends { name: string }>(router: Router, store: DefinitionStore, path: string, kind: DefinitionKind<T>): void {
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
      res.json(kind.list(store.current().defs));
    })
    .post(async (req, res) => {
      const created = await write(res, (defs) => createDefinition(kind, defs, req.body));
      res.status(201).location(`${path}/${encodeURIComponent(created.name)}`).json(created);
    })
    .all(methodNotAllowed(['GET', 'HEAD', 'POST']));

  const update = async (req: { params: { name: string }; body: unknown }, res: Response) => {
    res.json(await write(res, (defs) => updateDefinition(kind, defs, req.params.name, req.body)));
  };

  router
    .route(`${path}/:name`)
    .get((req, res) => {
      res.json(findDefinition(kind, store.current().defs, req.params.name));
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
  return router;
}
