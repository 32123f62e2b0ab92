/**
 * cors (config: proto/src/plugins/cors.ts). A preflight (OPTIONS with Origin and
 * Access-Control-Request-Method) is answered 204 by the gateway, with the CORS headers when the
 * origin, the method and every requested header are allowed and without them otherwise; with
 * `options_passthrough` its headers are added to whatever the upstream answers. Any other request
 * gets `Vary: Origin`, plus the CORS headers when its origin and method are allowed. A listed
 * origin is echoed; one allowed only by `*` gets `*`.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import { originListed, type CompiledCors } from '#proto/plugins/index';
import type { PluginRuntime } from './runtime.js';

const PREFLIGHT_VARY = 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers';

function allowedOrigin(cors: CompiledCors, origin: string): string | null {
  if (originListed(cors, origin)) return origin;
  return cors.anyOrigin ? '*' : null;
}

export function preflightHeaders(cors: CompiledCors, origin: string, method: string, requested: string | undefined): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = { vary: PREFLIGHT_VARY };
  const allowOrigin = allowedOrigin(cors, origin);
  if (allowOrigin === null || !cors.methods.has(method.toUpperCase())) return headers;
  const asked = (requested ?? '')
    .split(',')
    .map((h) => h.trim().toLowerCase())
    .filter((h) => h !== '');
  if (!cors.anyHeader && !asked.every((h) => cors.requestHeaders.has(h))) return headers;
  headers['access-control-allow-origin'] = allowOrigin;
  headers['access-control-allow-methods'] = cors.allowMethods;
  if (asked.length > 0) headers['access-control-allow-headers'] = asked.join(', ');
  if (cors.credentials) headers['access-control-allow-credentials'] = 'true';
  if (cors.maxAge) headers['access-control-max-age'] = cors.maxAge;
  return headers;
}

export const corsRuntime: PluginRuntime<CompiledCors> = {
  stage: (cors) => ({
    request(ex) {
      const req = ex.req;
      const origin = req.headers.origin;
      const requestedMethod = req.headers['access-control-request-method'];
      if (req.method === 'OPTIONS' && origin !== undefined && requestedMethod !== undefined) {
        const headers = preflightHeaders(cors, origin, requestedMethod, req.headers['access-control-request-headers']);
        if (!cors.optionsPassthrough) return { status: 204, headers };
        for (const name in headers) ex.addClientHeader(name, String(headers[name]));
        return;
      }
      ex.addClientHeader('vary', 'Origin');
      if (origin === undefined) return;
      const allowOrigin = allowedOrigin(cors, origin);
      if (allowOrigin === null || !cors.methods.has(req.method ?? 'GET')) return;
      ex.addClientHeader('access-control-allow-origin', allowOrigin);
      if (cors.credentials) ex.addClientHeader('access-control-allow-credentials', 'true');
      if (cors.exposeHeaders) ex.addClientHeader('access-control-expose-headers', cors.exposeHeaders);
      return;
    },
  }),
};
