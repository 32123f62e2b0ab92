/**
 * The bundled data plane (scripts/bundle-data-plane.mjs; what the image and the chart run, and what every
 * end-to-end test starts): what joining the modules into one file could break and the other tests
 * would not single out. Its imports are node's built-ins only (every package is inside), every file it
 * names relative to its own location exists, and the version it reports comes from package.json.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { pollUntil } from '../helpers/poll-until.js';
import { DATA_PLANE_SCRIPT } from '../helpers/start-data-plane.js';
import { REPO_ROOT } from '../helpers/service-process.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';

const bundlePath = join(REPO_ROOT, DATA_PLANE_SCRIPT);
let bundle: string;
let gw: Gateway | undefined;

beforeAll(async () => {
  bundle = await readFile(bundlePath, 'utf8').catch(() => {
    throw new Error(`${DATA_PLANE_SCRIPT} is missing: run npm run build first`);
  });
});

afterAll(async () => {
  await gw?.stop();
});

test('the bundle imports node built-ins only: every package it uses is inside it', () => {
  // `import x from"m"`, `import{a as b}from"m"`, `import*as x from"m"` (whitespace minified).
  const specifiers = [...bundle.matchAll(/\bimport\s*(?:[\w$]+\s*,?\s*)?(?:\{[^}]*\}|\*\s*as\s+[\w$]+)?\s*from\s*["']([^"']+)["']/g)].map((m) => m[1]);
  expect(specifiers.length).toBeGreaterThan(0);
  expect(specifiers.filter((s) => !s.startsWith('node:') && !builtinModules.includes(s))).toEqual([]);
  expect(specifiers).toContain('node:module');
  // Loaded from node_modules when used: pino-pretty (LOG_FORMAT=pretty) and ioredis (REDIS_URL) through
  // createRequire, the OpenTelemetry SDK (tracing on) by import(); the OpenTelemetry API is inside.
  expect(bundle).toContain('("pino-pretty")');
  expect(bundle).toContain('("ioredis")');
  expect(bundle).toContain('import("@opentelemetry/sdk-trace-base")');
  expect(bundle).not.toContain('import("@opentelemetry/api")');
});

test('every file the bundle names relative to its own location exists (gatehouse.proto, package.json)', () => {
  const named = [...bundle.matchAll(/new URL\((['"])([^'"]+)\1,\s*import\.meta\.url\)/g)].map((m) => m[2]);
  const files = named.map((rel) => fileURLToPath(new URL(rel, pathToFileURL(bundlePath))));
  expect(files.map((f) => f.slice(REPO_ROOT.length)).sort()).toEqual(['package.json', 'proto/gatehouse/v1/gatehouse.proto']);
  for (const file of files) expect({ file, exists: existsSync(file) }).toEqual({ file, exists: true });
  expect(dirname(bundlePath)).toBe(join(REPO_ROOT, 'data-plane', 'bundle'));
});

test('a bundled data plane syncs and reports the version in package.json to the control plane', async () => {
  gw = await startGateway({ dataPlanes: 1 });
  const { version } = JSON.parse(await readFile(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
  const dp = gw.dp;
  // Listed once its first ACK is in (the list is eventually consistent).
  const rows = await pollUntil(
    async () => {
      const res = await gw!.admin.dataplanes();
      const listed = (res.body ?? []) as { id: string; software_version: string; last_ack: unknown }[];
      return res.status === 200 && listed.some((row) => row.id === dp.id && row.last_ack !== null) ? listed : undefined;
    },
    { what: `GET /dataplanes to list ${dp.id}`, details: () => dp.recentLogs() },
  );
  expect(rows.map((row) => ({ id: row.id, software_version: row.software_version }))).toEqual([{ id: dp.id, software_version: version }]);
});
