/**
 * The admin REST API (SPEC §3). Request flow: metrics timer → public routes (/healthz, /readyz,
 * /metrics, POST /login) → bearer-token check → JSON body (≤ 1 MiB) → definition routes and
 * /dataplanes → 404 → the one error handler.
 */
import express, { type Express, type RequestHandler } from 'express';
import type { Logger } from '#proto/logger';
import type { DefinitionStore } from '../store/index.js';
import type { SnapshotSource } from '../snapshot/snapshot-builder.js';
import type { DataPlaneStatus } from '../grpc/snapshot-server.js';
import type { ControlPlaneMetrics } from '../metrics/control-plane-metrics.js';
import type { AdminAuth } from './admin-auth.js';
import { createDefinitionRoutes } from './definition-routes.js';
import { createErrorHandler, methodNotAllowed, notFound, toGatehouseError } from './error-handler.js';

export const MAX_BODY_BYTES = 1024 * 1024;

export interface AdminAppOptions {
  store: DefinitionStore;
  snapshots: SnapshotSource;
  dataPlanes(): DataPlaneStatus[];
  auth: AdminAuth;
  metrics: ControlPlaneMetrics;
  logger: Logger;
}

/** Every content type is read as JSON: the admin API speaks nothing else. */
const jsonBody = express.json({ limit: MAX_BODY_BYTES, strict: true, type: () => true });

export function createAdminApp({ store, snapshots, dataPlanes, auth, metrics, logger }: AdminAppOptions): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);

  const observe: RequestHandler = (req, res, next) => {
    const start = process.hrtime.bigint();
    res.on('finish', () => {
      const route = req.route ? `${req.baseUrl}${String(req.route.path)}` : 'unmatched';
      metrics.observeHttp(req.method, route, res.statusCode, Number(process.hrtime.bigint() - start) / 1e9);
    });
    // Admin responses carry tokens and configuration: never cache them.
    res.set({ 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' });
    next();
  };

  const requireAdmin: RequestHandler = async (req, _res, next) => {
    await auth.verify(req.get('authorization'));
    next();
  };

  app.use(observe);

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });

  app.get('/readyz', async (_req, res) => {
    const { version, hash } = snapshots.current();
    try {
      await store.checkReady();
      res.json({ ready: true, snapshot: { version, hash } });
    } catch (err) {
      res.status(503).json({ ready: false, error: toGatehouseError(err).message, snapshot: { version, hash } });
    }
  });

  app.get('/metrics', async (_req, res) => {
    res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });

  app
    .route('/login')
    .post(jsonBody, async (req, res) => {
      const body = (req.body ?? {}) as { username?: unknown; password?: unknown };
      res.json(await auth.login(body.username, body.password));
    })
    .all(methodNotAllowed(['POST']));

  app.use(requireAdmin, jsonBody);
  app.use(createDefinitionRoutes(store));
  app
    .route('/dataplanes')
    .get((_req, res) => {
      res.json(dataPlanes());
    })
    .all(methodNotAllowed(['GET', 'HEAD']));

  app.use(notFound);
  app.use(createErrorHandler(logger));
  return app;
}
