/**
 * GET /openapi.json: the admin API's OpenAPI 3.1 document (openapi-document.ts). Public, like
 * /login: it describes the API, never the configuration, and is the same for every deployment.
 * Built on the first request, then the same bytes are served.
 */
import { Router } from 'express';
import { buildOpenApiDocument } from './openapi-document.js';
import { methodNotAllowed } from './error-handler.js';

/** The admin API's version, as the document's `info.version`. */
export const ADMIN_API_VERSION = '0.1.0';

export function createOpenApiRoutes(): Router {
  let body: string | null = null;
  const router = Router();
  router
    .route('/openapi.json')
    .get((_req, res) => {
      body ??= JSON.stringify(buildOpenApiDocument(ADMIN_API_VERSION));
      res.type('application/json').send(body);
    })
    .all(methodNotAllowed(['GET', 'HEAD']));
  return router;
}
