/**
 * CRUD routes for /apis and /oauth/servers. Every write runs inside store.update(), so the
 * checks in definition-writes.ts see the latest state; the response is sent after the write
 * is durable and carries the snapshot version that includes it.
 */
import { Router, type Response } from 'express';
import type { ApiDefinition, Definitions, OAuthServerDefinition } from '#proto/definition/index';
import type { DefinitionStore } from '../store/index.js';
import {
  createApi,
  createOAuthServer,
  deleteApi,
  deleteOAuthServer,
  findApi,
  findOAuthServer,
  updateApi,
  updateOAuthServer,
  type WriteResult,
} from './definition-writes.js';
import { methodNotAllowed } from './error-handler.js';

interface Resource<T> {
  path: string;
  list(defs: Definitions): T[];
  find(defs: Definitions, name: string): T;
  create(defs: Definitions, body: unknown): WriteResult<T>;
  update(defs: Definitions, name: string, body: unknown): WriteResult<T>;
  remove(defs: Definitions, name: string): Definitions;
}

const apis: Resource<ApiDefinition> = {
  path: '/apis',
  list: (defs) => defs.apis,
  find: findApi,
  create: createApi,
  update: updateApi,
  remove: deleteApi,
};

const oauthServers: Resource<OAuthServerDefinition> = {
  path: '/oauth/servers',
  list: (defs) => defs.oauthServers,
  find: findOAuthServer,
  create: createOAuthServer,
  update: updateOAuthServer,
  remove: deleteOAuthServer,
};

function resourceRoutes<T extends { name: string }>(router: Router, store: DefinitionStore, resource: Resource<T>): void {
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
    .route(resource.path)
    .get((_req, res) => {
      res.json(resource.list(store.current().defs));
    })
    .post(async (req, res) => {
      const created = await write(res, (defs) => resource.create(defs, req.body));
      res.status(201).location(`${resource.path}/${encodeURIComponent(created.name)}`).json(created);
    })
    .all(methodNotAllowed(['GET', 'HEAD', 'POST']));

  const update = async (req: { params: { name: string }; body: unknown }, res: Response) => {
    res.json(await write(res, (defs) => resource.update(defs, req.params.name, req.body)));
  };

  router
    .route(`${resource.path}/:name`)
    .get((req, res) => {
      res.json(resource.find(store.current().defs, req.params.name));
    })
    .put(update)
    .patch(update)
    .delete(async (req, res) => {
      await write(res, (defs) => ({ defs: resource.remove(defs, req.params.name), value: null }));
      res.status(204).end();
    })
    .all(methodNotAllowed(['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE']));
}

export function createDefinitionRoutes(store: DefinitionStore): Router {
  const router = Router();
  resourceRoutes(router, store, apis);
  resourceRoutes(router, store, oauthServers);
  return router;
}
