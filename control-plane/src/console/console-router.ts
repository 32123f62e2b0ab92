/**
 * The web console (`/console`): static files only (HTML, ES modules, CSS from control-plane/console/),
 * no server-side templating and no data in them, so they can be cached. The page talks to the admin
 * API on the same origin with the bearer token it keeps in sessionStorage; nothing here needs a token.
 * Every response under /console carries a strict Content-Security-Policy (scripts, styles and fetches
 * from this origin only, nothing inline, no framing).
 */
import { fileURLToPath } from 'node:url';
import express, { Router, type RequestHandler, type Response } from 'express';
import { GatehouseError } from '#proto/errors';

/** control-plane/console/, from both src/console/ (tests) and dist/console/ (built). */
export const CONSOLE_STATIC_DIR = fileURLToPath(new URL('../../console/', import.meta.url));

export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS: Record<string, string> = {
  'Content-Security-Policy': CONSOLE_CSP,
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
};

/** The page is revalidated on every load (ETag → 304); modules and styles may be reused for a few minutes. */
export const HTML_CACHE_CONTROL = 'no-cache';
export const ASSET_CACHE_CONTROL = 'public, max-age=300';

const securityHeaders: RequestHandler = (_req, res, next) => {
  res.set(SECURITY_HEADERS);
  next();
};

function cacheHeaders(res: Response, path: string): void {
  res.setHeader('Cache-Control', path.endsWith('.html') ? HTML_CACHE_CONTROL : ASSET_CACHE_CONTROL);
}

export function createConsoleRouter(staticDir: string = CONSOLE_STATIC_DIR): Router {
  const router = Router();
  router.use(securityHeaders);
  router.use(
    express.static(staticDir, {
      index: 'index.html',
      dotfiles: 'ignore',
      cacheControl: false,
      setHeaders: cacheHeaders,
    }),
  );
  // Unknown files under /console: the admin API's own 404, without asking for a token.
  router.use(() => {
    throw new GatehouseError('ROUTE_NOT_FOUND', 'not found');
  });
  return router;
}
