/**
 * The console's static files on a real port, mounted as app.ts mounts them: what each response
 * carries (CSP, no framing, caching) and that nothing outside control-plane/console/ is served.
 */
import { once } from 'node:events';
import { readdir, readFile } from 'node:fs/promises';
import { request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import express from 'express';
import { createLogger } from '#proto/logger';
import { createErrorHandler } from '../admin/error-handler.js';
import { ASSET_CACHE_CONTROL, CONSOLE_CSP, CONSOLE_STATIC_DIR, HTML_CACHE_CONTROL, createConsoleRouter } from './console-router.js';

let server: Server;
let base: string;

beforeAll(async () => {
  const app = express();
  app.use('/console', createConsoleRouter());
  app.use(createErrorHandler(createLogger('control-plane', 'silent')));
  server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.close();
  await once(server, 'close');
});

const get = (path: string) => fetch(`${base}${path}`, { redirect: 'manual' });

/** The path sent as written (fetch would resolve `%2e%2e` segments before sending). */
async function getRaw(path: string): Promise<{ status: number; csp: unknown; body: unknown }> {
  const req = request(`${base}/`, { path });
  req.end();
  const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
  let text = '';
  for await (const chunk of res) text += String(chunk);
  return { status: res.statusCode!, csp: res.headers['content-security-policy'], body: JSON.parse(text) };
}

test.each([
  ['the page', '/console/', 200, 'text/html', HTML_CACHE_CONTROL],
  ['a module', '/console/js/main.js', 200, 'text/javascript', ASSET_CACHE_CONTROL],
  ['the stylesheet', '/console/console.css', 200, 'text/css', ASSET_CACHE_CONTROL],
  ['the icon', '/console/icon.svg', 200, 'image/svg+xml', ASSET_CACHE_CONTROL],
])('%s: %s is %i %s, cached as %s, with the security headers', async (_what, path, status, type, cache) => {
  const res = await get(path);
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toContain(type);
  expect(res.headers.get('cache-control')).toBe(cache);
  expect(res.headers.get('etag')).toBeTruthy();
  expect(res.headers.get('content-security-policy')).toBe(CONSOLE_CSP);
  expect(res.headers.get('x-frame-options')).toBe('DENY');
  expect(res.headers.get('x-content-type-options')).toBe('nosniff');
  expect(res.headers.get('referrer-policy')).toBe('no-referrer');
});

test('the CSP allows nothing inline and no framing', () => {
  expect(CONSOLE_CSP).toContain("default-src 'none'");
  expect(CONSOLE_CSP).toContain("script-src 'self'");
  expect(CONSOLE_CSP).toContain("frame-ancestors 'none'");
  expect(CONSOLE_CSP).not.toMatch(/unsafe-(inline|eval)/);
});

test('/console redirects to /console/ so relative module paths resolve', async () => {
  const res = await get('/console');
  expect(res.status).toBe(301);
  expect(res.headers.get('location')).toBe('/console/');
});

test.each([
  ['an unknown file', '/console/nope.js'],
  ['a traversal', '/console/../src/console/console-router.ts'],
  ['an encoded traversal', '/console/%2e%2e/%2e%2e/package.json'],
  ['an encoded slash traversal', '/console/..%2f..%2fpackage.json'],
  ['a dotfile', '/console/.hidden'],
])('%s is the admin 404 with the security headers', async (_what, path) => {
  expect(await getRaw(path)).toEqual({ status: 404, csp: CONSOLE_CSP, body: { error: 'not found' } });
});

test('the page holds no inline script, style or handler (the CSP would block them)', async () => {
  const html = await (await get('/console/')).text();
  expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
  expect(html).not.toMatch(/\sstyle=|<style/);
  expect(html).not.toMatch(/\son[a-z]+=/);
});

test('no module parses HTML strings, evaluates code, sets inline styles or touches localStorage', async () => {
  const dir = join(CONSOLE_STATIC_DIR, 'js');
  const modules = (await readdir(dir)).filter((f) => f.endsWith('.js'));
  expect(modules.length).toBeGreaterThan(3);
  for (const file of modules) {
    const code = await readFile(join(dir, file), 'utf8');
    const found = code.match(/\.(innerHTML|outerHTML|insertAdjacentHTML)\b|\beval\(|new Function\(|\.style\.|\blocalStorage\./g) ?? [];
    expect({ file, found }).toEqual({ file, found: [] });
  }
});
