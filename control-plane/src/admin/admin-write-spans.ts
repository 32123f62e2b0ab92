/**
 * Tracing on: one OpenTelemetry SERVER span per admin write (POST, PUT, PATCH, DELETE on
 * /apis, /oauth/servers, /credentials/basic_auth, /credentials/key_auth and /config), from the authenticated request to
 * its response, child of the caller's valid `traceparent`. Attributes: the definition kind, its
 * name, the result (`ok`, `rejected` for 4xx, `failed` for 5xx), the status and, on failure, the
 * error code as `error.type`. Loaded by main.ts only when tracing is on.
 */
import { SpanKind, SpanStatusCode, type Tracer } from '@opentelemetry/api';
import type { RequestHandler } from 'express';
import { spanParent } from '#proto/span-parent';
import { errorCodeOf } from './error-handler.js';

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** Collection path → the kind its spans name. */
const KINDS: ReadonlyArray<readonly [collection: string, kind: string]> = [
  ['/apis', 'api'],
  ['/oauth/servers', 'oauth-server'],
  ['/credentials/basic_auth', 'basic-auth-credential'],
  ['/credentials/key_auth', 'key-auth-credential'],
  ['/config', 'config'],
];

export interface WriteTarget {
  kind: string;
  /** The collection, plus `/{name}` when the path names a definition: the span's route. */
  route: string;
  /** From the path, else the body's `name` / `username` (a POST); undefined for /config itself. */
  name: string | undefined;
}

/** What a write request writes; null for anything else (reads, /login, POST /explain). */
export function writeTarget(method: string, path: string, body: unknown): WriteTarget | null {
  if (!WRITE_METHODS.has(method)) return null;
  for (const [collection, kind] of KINDS) {
    if (path === collection) {
      const fields = (typeof body === 'object' && body !== null ? body : {}) as { name?: unknown; username?: unknown };
      const name = typeof fields.name === 'string' ? fields.name : typeof fields.username === 'string' ? fields.username : undefined;
      return { kind, route: collection, name };
    }
    if (path.startsWith(`${collection}/`)) {
      const rest = path.slice(collection.length + 1);
      let name = rest;
      try {
        name = decodeURIComponent(rest);
      } catch {
        // a malformed escape: the route answers 404; the span keeps the raw text
      }
      return { kind, route: `${collection}/{name}`, name };
    }
  }
  return null;
}

export function traceAdminWrites(tracer: Tracer): RequestHandler {
  return (req, res, next) => {
    const target = writeTarget(req.method, req.path, req.body);
    if (!target) {
      next();
      return;
    }
    const attributes: Record<string, string> = { 'http.request.method': req.method, 'http.route': target.route, 'gatehouse.kind': target.kind };
    if (target.name !== undefined) attributes['gatehouse.name'] = target.name;
    const span = tracer.startSpan(`${req.method} ${target.route}`, { kind: SpanKind.SERVER, attributes }, spanParent(req.headers.traceparent));
    res.once('close', () => {
      const status = res.statusCode;
      span.setAttribute('http.response.status_code', status);
      span.setAttribute('gatehouse.result', status < 400 ? 'ok' : status < 500 ? 'rejected' : 'failed');
      const code = errorCodeOf(res);
      if (code) span.setAttribute('error.type', code);
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR, message: code });
      span.end();
    });
    next();
  };
}
