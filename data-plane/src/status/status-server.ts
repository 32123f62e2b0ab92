/**
 * The data plane's status listener (STATUS_PORT), apart from the proxy port so no user route is
 * ever shadowed: GET /healthz (alive), GET /readyz (a snapshot is applied), GET /metrics.
 * One process answers from its own holder and registry; a WORKERS primary passes a `source`
 * that asks its workers (data-plane/src/workers).
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import { adminBody, GatehouseError } from '#proto/errors';
import type { Logger } from '#proto/logger';
import type { TableSource } from '../table/index.js';
import { listen } from '#proto/listen';

/** What /readyz (the body; 200 when `ready`, else 503) and /metrics report. */
export interface StatusSource {
  readiness(): Promise<{ ready: boolean } & Record<string, unknown>>;
  metrics(): Promise<{ contentType: string; text: string }>;
}

/** The source of a process that serves traffic itself; `waiting` says why no snapshot is there yet. */
function processSource(holder: TableSource, registry: Registry, waiting?: () => string): StatusSource {
  return {
    async readiness() {
      const snapshot = holder.current();
      if (snapshot) return { ready: true, version: snapshot.version, hash: snapshot.hash };
      return { ready: false, reason: `no snapshot yet${waiting ? `: ${waiting()}` : ''}` };
    },
    async metrics() {
      return { contentType: registry.contentType, text: await registry.metrics() };
    },
  };
}

export interface StatusServer {
  readonly server: Server;
  listen(port: number, host?: string): Promise<number>;
  /** Once set (on shutdown), /readyz answers 503 so load balancers stop sending traffic. */
  markDraining(): void;
  close(): Promise<void>;
}

function send(res: ServerResponse, status: number, body: string, contentType = 'application/json'): void {
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store' });
  res.end(body);
}

function sendError(res: ServerResponse, err: GatehouseError): void {
  send(res, err.status, adminBody(err));
}

export function createStatusServer(
  deps: ({ holder: TableSource; registry: Registry; waiting?: () => string } | { source: StatusSource }) & { logger: Logger },
): StatusServer {
  const source = 'source' in deps ? deps.source : processSource(deps.holder, deps.registry, deps.waiting);
  let draining = false;

  async function handle(method: string, path: string, res: ServerResponse): Promise<void> {
    const known = path === '/healthz' || path === '/readyz' || path === '/metrics';
    if (!known) return sendError(res, new GatehouseError('ROUTE_NOT_FOUND', 'not found'));
    if (method !== 'GET' && method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD');
      return sendError(res, new GatehouseError('METHOD_NOT_ALLOWED', 'method not allowed'));
    }
    if (path === '/healthz') return send(res, 200, JSON.stringify({ status: 'ok' }));
    if (path === '/readyz') {
      if (draining) return send(res, 503, JSON.stringify({ ready: false, reason: 'shutting down' }));
      const readiness = await source.readiness();
      return send(res, readiness.ready ? 200 : 503, JSON.stringify(readiness));
    }
    const metrics = await source.metrics();
    send(res, 200, metrics.text, metrics.contentType);
  }

  // Probes and scrapes are tiny GETs: a client that is slower than this is not one of them.
  const server = createServer({ headersTimeout: 10_000, requestTimeout: 30_000 }, (req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    handle(req.method ?? 'GET', path, res).catch((err: unknown) => {
      deps.logger.error({ err, path }, 'status request failed');
      if (!res.headersSent) sendError(res, new GatehouseError('INTERNAL', 'internal error'));
      else res.destroy();
    });
  });

  return {
    server,
    listen(port, host) {
      return listen(server, port, host);
    },
    markDraining() {
      draining = true;
    },
    close() {
      return new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
