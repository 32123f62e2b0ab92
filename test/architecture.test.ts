/**
 * Dependencies point one way (docs/development.md, "Dependencies between folders"): this scans import specifiers
 * per folder.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function sourceFiles(dir: string): string[] {
  const abs = join(root, dir);
  let entries: string[];
  try {
    entries = readdirSync(abs);
  } catch {
    return [];
  }
  return entries.flatMap((name) => {
    const path = join(abs, name);
    if (statSync(path).isDirectory()) return sourceFiles(relative(root, path));
    return name.endsWith('.ts') && !name.endsWith('.test.ts') ? [path] : [];
  });
}

/** Import targets of a file: bare specifiers as written, relative ones resolved to repo paths. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specs = [...text.matchAll(/(?:import|export)[^'"]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => m[1] ?? m[2]);
  return specs.map((s) => (s.startsWith('.') ? relative(root, resolve(dirname(file), s)) : s));
}

const rules: Array<[folder: string, forbidden: RegExp, why: string]> = [
  ['proto/src', /^(control-plane|data-plane)\//, 'proto/ imports no service code'],
  ['control-plane/src', /^data-plane\//, 'the services never import each other'],
  ['data-plane/src', /^control-plane\//, 'the services never import each other'],
  ['data-plane/src/routing', /^(data-plane\/src\/(proxy|sync|table|auth)|node:(net|http|https|fs)|undici$)/, 'routing is pure'],
  ['proto/src/routing', /^(node:(net|http|https|fs)|undici$)/, 'routing is pure (the DP routes with it, the CP explains with it)'],
  ['proto/src/compile', /^(node:(net|http|https|fs)|undici$)/, 'compile is pure'],
  [
    'data-plane/src/sync',
    /^data-plane\/src\/(proxy|routing|auth|plugins|health)\//,
    'sync receives, caches and applies snapshots; table/ builds what they serve',
  ],
  ['data-plane/src/table', /^data-plane\/src\/(sync|proxy)\//, 'the serving table is built from content, whoever delivers it and whoever serves it'],
  ['data-plane/src/proxy', /^data-plane\/src\/sync\//, 'the proxy reads the serving table (table/), not the holder that applies snapshots'],
  ['data-plane/src/auth', /^data-plane\/src\/(proxy|sync|table)\//, 'auth gives the table its authorizer and the proxy its token checks; it uses neither'],
  ['data-plane/src/plugins', /^data-plane\/src\/(proxy|sync|table)\//, 'plugins give hooks per snapshot; only the proxy runs them per request'],
  ['data-plane/src/health', /^data-plane\/src\/(sync|table)\//, 'health checks are given to the table builder; they know nothing of it'],
  ['proto/src/plugins', /^(node:(net|http|https|fs)|undici$)/, 'plugin configs compile without I/O'],
  ['control-plane/src/store', /^(express$|node:http$|control-plane\/src\/(admin|grpc))/, 'the store knows no HTTP'],
  ['control-plane/src/grpc', /^control-plane\/src\/(store|admin)/, 'the gRPC server sees snapshots, not the store'],
  ['control-plane/src/store', /^control-plane\/src\/controller/, 'the store knows nothing of the controller that writes status'],
  ['cli/src', /^(#proto\/|proto\/|control-plane\/|data-plane\/)/, 'the CLI speaks only the admin API'],
  [
    'control-plane/src/controller',
    /^(express$|control-plane\/src\/(admin|grpc|snapshot))/,
    'the controller sees CR verdicts and data-plane replies, given by main',
  ],
];

describe('import direction', () => {
  test.each(rules)('%s must not import %s (%s)', (folder, forbidden) => {
    const files = sourceFiles(folder);
    expect(files.length).toBeGreaterThan(0);
    const offending = files.flatMap((f) =>
      importsOf(f)
        .filter((spec) => forbidden.test(spec))
        .map((spec) => `${relative(root, f)} → ${spec}`),
    );
    expect(offending).toEqual([]);
  });
});

describe('packages the data plane loads only when its configuration needs them', () => {
  // Each is loaded with import() (or createRequire) where first needed, so a DP that does not need it
  // starts without it: jose only with a jwt OAuth server, ioredis only with
  // REDIS_URL, pino-pretty only with LOG_FORMAT=pretty. A static import anywhere in the DP's sources
  // would load it at every start.
  const lazy = ['jose', 'ioredis', 'pino-pretty'];
  test.each(lazy)('no data-plane module imports %s statically (type-only imports are erased)', (pkg) => {
    const files = [...sourceFiles('data-plane/src'), ...sourceFiles('proto/src')];
    const staticImport = new RegExp(`^\\s*(?:import|export)\\s+(?!type\\b)[^;]*?from\\s+['"]${pkg}['"]`, 'm');
    const offending = files.filter((f) => staticImport.test(readFileSync(f, 'utf8'))).map((f) => relative(root, f));
    expect(offending).toEqual([]);
  });
});
