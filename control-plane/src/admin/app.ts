/**
 * The admin REST API (docs/admin-api.md "Administration API"). Request flow: metrics timer → public routes (/healthz, /readyz,
 * /metrics, POST /login (throttled per client address and user name)) → bearer-token check (a viewer
 * token may only read) → JSON body (≤ 1 MiB) → definition routes and /dataplanes → 404 → the one
 * error handler.
 */
import express, { type Express, type RequestHandler } from 'express';
import type { Logger } from '#proto/logger';
import type { DefinitionStore } from '../store/index.js';
import type { SnapshotSource } from '../snapshot/snapshot-builder.js';
import type { DataPlaneStatus } from '../grpc/snapshot-server.js';
import type { ControlPlaneMetrics } from '../metrics/control-plane-metrics.js';
import { GatehouseError } from '#proto/errors';
import { assertNestingDepth } from '#proto/definition/field-path';
import type { AdminAuth } from './admin-auth.js';
import type { LoginThrottle } from './login-throttle.js';
import { createDefinitionRoutes } from './definition-routes.js';
import { createExplainRoutes, EXPLAIN_PATH } from './explain-route.js';
import { createOpenApiRoutes } from './openapi-route.js';
import { createConsoleRouter } from '../console/console-router.js';
import { createConfigRoutes } from './config-routes.js';
import { createRecordedUpdate } from './recorded-update.js';
import { createMemoryHistory, type ConfigHistory } from '../store/config-history.js';
import { createErrorHandler, methodNotAllowed, notFound, toGatehouseError } from './error-handler.js';

export const MAX_BODY_BYTES = 1024 * 1024;

export interface AdminAppOptions {
  store: DefinitionStore;
  /** What the data planes are served (Service targets expanded), for POST /explain; absent = the store's content. */
  served?: Pick<DefinitionStore, 'current'> & { versionOf?(revision: number): number };
  snapshots: SnapshotSource;
  dataPlanes(): DataPlaneStatus[];
  auth: AdminAuth;
  /** Backoff for failed logins per client address and user name; absent = none (unit tests). */
  loginThrottle?: LoginThrottle;
  /** ALLOW_SHORT_HMAC_KEYS: said on every row of GET /dataplanes (those data planes may verify tokens under short keys). */
  allowShortHmacKeys?: boolean;
  metrics: ControlPlaneMetrics;
  logger: Logger;
  /** Versions kept for GET /config/history and rollback; absent = in memory (unit tests). */
  history?: ConfigHistory;
  /** Tracing on: a span per write (admin-write-spans.ts); absent = none. */
  writeSpans?: RequestHandler;
}

/** Methods a viewer token may use: reads only. */
const READ_METHODS = new Set(['GET', 'HEAD']);
/** POSTs that only read (a viewer may call them). */
const READ_ONLY_POSTS = new Set([EXPLAIN_PATH]);
const MAX_THROTTLE_KEY_CHARS = 256;

/** Throttle keys of one login: the client's address (the TCP peer; no proxy headers are trusted) and the user name. */
function throttledUser(username: unknown): string {
  return (typeof username === 'string' ? username : '').slice(0, MAX_THROTTLE_KEY_CHARS);
}

/** Every content type is read as JSON: the admin API speaks nothing else. */
const jsonBody: RequestHandler[] = [
  express.json({ limit: MAX_BODY_BYTES, strict: true, type: () => true }),
  (req, _res, next) => {
    assertNestingDepth(req.body);
    next();
  },
];

export function createAdminApp({
  store,
  served = store,
  snapshots,
  dataPlanes,
  auth,
  loginThrottle,
  metrics,
  logger,
  history = createMemoryHistory({ logger }),
  writeSpans,
  allowShortHmacKeys = false,
}: AdminAppOptions): Express {
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

  const requireAdmin: RequestHandler = async (req, res, next) => {
    const identity = await auth.verify(req.get('authorization'));
    res.locals.identity = identity;
    if (identity.role === 'viewer' && !READ_METHODS.has(req.method) && !(req.method === 'POST' && READ_ONLY_POSTS.has(req.path))) {
      throw new GatehouseError('ADMIN_FORBIDDEN', 'this account is read-only (viewer)');
    }
    next();
  };

  const login: RequestHandler = async (req, res) => {
    const body = (req.body ?? {}) as { username?: unknown; password?: unknown };
    const address = req.socket.remoteAddress ?? 'unknown';
    const user = throttledUser(body.username);
    const waitMs = loginThrottle?.waitMs(address, user) ?? 0;
    if (waitMs > 0) {
      res.set('Retry-After', String(Math.ceil(waitMs / 1000)));
      throw new GatehouseError('LOGIN_THROTTLED', 'too many failed logins; retry later');
    }
    try {
      res.json(await auth.login(body.username, body.password));
    } catch (err) {
      loginThrottle?.failed(address, user);
      throw err;
    }
    loginThrottle?.succeeded(address, user);
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
    .post(...jsonBody, login)
    .all(methodNotAllowed(['POST']));

  // The web console: static files, public like /login (it asks for a token itself).
  app.use('/console', createConsoleRouter());

  // The OpenAPI document of this API: public like /login (it holds no configuration).
  app.use(createOpenApiRoutes());

  app.use(requireAdmin, ...jsonBody);
  if (writeSpans) app.use(writeSpans);
  const update = createRecordedUpdate(store, history, logger, served.versionOf);
  app.use(createDefinitionRoutes(store, update));
  app.use(createConfigRoutes({ store, history, update, logger }));
  app
    .route('/dataplanes')
    .get((_req, res) => {
      res.json(allowShortHmacKeys ? dataPlanes().map((dp) => ({ ...dp, allow_short_hmac_keys: true })) : dataPlanes());
    })
    .all(methodNotAllowed(['GET', 'HEAD']));
  app.use(createExplainRoutes(served));

  app.use(notFound);
  app.use(createErrorHandler(logger));
  return app;
}
