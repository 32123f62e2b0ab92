/**
 * The bundled services (scripts/bundle.mjs; what the image and the chart run, and what every end-to-end
 * test starts): what joining the modules into one file could break and the other tests would not single
 * out. Each bundle's imports are node's built-ins only (every package is inside, but for the few loaded
 * from node_modules when used), every file it names relative to its own location exists, and the data
 * plane reports the version in package.json.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { pollUntil } from '../helpers/poll-until.js';
import { CONTROL_PLANE_SCRIPT } from '../helpers/start-control-plane.js';
import { DATA_PLANE_SCRIPT } from '../helpers/start-data-plane.js';
import { REPO_ROOT } from '../helpers/service-process.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';

const bundles = {
  'control-plane': {
    script: CONTROL_PLANE_SCRIPT,
    // gatehouse.proto from proto/dist/grpc.js, the web console's directory from its router.
    files: ['control-plane/console/', 'proto/gatehouse/v1/gatehouse.proto'],
    // Loaded from node_modules when used: pino-pretty (LOG_FORMAT=pretty), through createRequire.
    fromNodeModules: ['("pino-pretty")'],
  },
  'data-plane': {
    script: DATA_PLANE_SCRIPT,
    files: ['package.json', 'proto/gatehouse/v1/gatehouse.proto'],
    // pino-pretty and ioredis (REDIS_URL) through createRequire, the OpenTelemetry SDK (tracing on) by import().
    fromNodeModules: [
      '("pino-pretty")',
      '("ioredis")',
      'import("@opentelemetry/sdk-trace-base")',
      // One exporter per OTLP protocol (OTEL_EXPORTER_OTLP_PROTOCOL), each loaded only when chosen.
      'import("@opentelemetry/exporter-trace-otlp-proto")',
      'import("@opentelemetry/exporter-trace-otlp-http")',
      'import("@opentelemetry/exporter-trace-otlp-grpc")',
    ],
  },
};
const sources = new Map<string, string>();
let gw: Gateway | undefined;

beforeAll(async () => {
  for (const [service, { script }] of Object.entries(bundles)) {
    sources.set(
      service,
      await readFile(join(REPO_ROOT, script), 'utf8').catch(() => {
        throw new Error(`${script} is missing: run npm run build first`);
      }),
    );
  }
});

afterAll(async () => {
  await gw?.stop();
});

describe.each(Object.entries(bundles))('%s bundle', (service, { script, files, fromNodeModules }) => {
  test('imports node built-ins only: every package it uses at every start is inside it', () => {
    const bundle = sources.get(service)!;
    // `import x from"m"`, `import{a as b}from"m"`, `import*as x from"m"` (whitespace minified).
    const specifiers = [...bundle.matchAll(/\bimport\s*(?:[\w$]+\s*,?\s*)?(?:\{[^}]*\}|\*\s*as\s+[\w$]+)?\s*from\s*["']([^"']+)["']/g)].map((m) => m[1]);
    expect(specifiers).toContain('node:module');
    expect(specifiers.filter((s) => !s.startsWith('node:') && !builtinModules.includes(s))).toEqual([]);
    for (const call of fromNodeModules) expect(bundle).toContain(call);
    // The OpenTelemetry API is inside (the proxy's tracer imports it statically).
    expect(bundle).not.toContain('import("@opentelemetry/api")');
  });

  test('every file it names relative to its own location exists', () => {
    const bundle = sources.get(service)!;
    const named = [...bundle.matchAll(/new URL\((['"])([^'"]+)\1,\s*import\.meta\.url\)/g)].map((m) => m[2]);
    const paths = named.map((rel) => fileURLToPath(new URL(rel, pathToFileURL(join(REPO_ROOT, script)))));
    expect(paths.map((f) => f.slice(REPO_ROOT.length)).sort()).toEqual(files);
    for (const path of paths) expect({ path, exists: existsSync(path) }).toEqual({ path, exists: true });
  });
});

test('a bundled data plane syncs from a bundled control plane and reports the version in package.json', async () => {
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
