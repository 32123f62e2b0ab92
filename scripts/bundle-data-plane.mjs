// The data plane as one file, data-plane/bundle/main.js: what the image and the Helm chart run (README
// "Data plane memory"). Node resolving and compiling ~1,000 files at start-up (undici ~110 ms, zod ~85, prom-client
// ~65, grpc-js ~60 of a ~0.5 s start) is most of a data plane's start before it can sync; one file of the same
// code starts ~200 ms sooner and with ~350 ms less CPU (bench `memory` section, alternated runs).
// Input is tsc's output (run `npm run build` first), so the bundle is the code the tests run, only joined.
//   node scripts/bundle-data-plane.mjs
import { readFile } from 'node:fs/promises';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { build } from 'esbuild';

const root = resolve(import.meta.dirname, '..');
const BUNDLE = join(root, 'data-plane/bundle/main.js');

/**
 * `new URL('<relative>', import.meta.url)` means "relative to this module's file"; in the bundle
 * import.meta.url is the bundle's, so each such path is rewritten to name the same file from there
 * (gatehouse.proto from proto/dist/grpc.js, package.json from data-plane/dist/main.js). The image keeps
 * the tree's layout, so the files are where they are in this checkout.
 */
const moduleRelativeUrls = {
  name: 'module-relative-urls',
  setup(b) {
    const ours = new RegExp(`^${root.replaceAll(/[.*+?^${}()|[\]\\]/g, '\\$&')}${sep}(proto|data-plane)${sep}dist${sep}.*\\.js$`);
    b.onLoad({ filter: ours }, async ({ path }) => {
      const source = await readFile(path, 'utf8');
      if (!source.includes('import.meta.url')) return undefined;
      const contents = source.replaceAll(/new URL\((['"])([^'"]+)\1, import\.meta\.url\)/g, (_, quote, target) => {
        const file = resolve(dirname(path), target);
        const fromBundle = relative(dirname(BUNDLE), file).split(sep).join('/') + (target.endsWith('/') ? '/' : '');
        return `new URL(${quote}${fromBundle}${quote}, import.meta.url)`;
      });
      return { contents, loader: 'js' };
    });
  },
};

await build({
  entryPoints: [join(root, 'data-plane/dist/main.js')],
  outfile: BUNDLE,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  // CommonJS packages inside an ES module bundle call require() for node's built-ins.
  banner: { js: "import { createRequire as __gatehouseRequire } from 'node:module'; const require = __gatehouseRequire(import.meta.url);" },
  plugins: [moduleRelativeUrls],
  // The OpenTelemetry SDK is imported only with tracing on (proto/src/tracing.ts), so it is left to
  // node_modules: inside, its ~650 KB of source would be held by every data plane, since V8 keeps a
  // script's source as long as the script. The API stays inside: the proxy's tracer imports it
  // statically, which an external would turn into a load at every start (~30 ms); the SDK's own copy of
  // it shares the bundled one's state through the API's global registration. Without whitespace the
  // file is 2.4 MB instead of 3.4. 10 APIs synced, RSS: 88.5–88.9 MiB with the SDK inside, 83.7–84.2
  // without it and without whitespace, 85.2–86.1 from data-plane/dist (3 alternated runs). Names are
  // kept, so stack traces still name functions.
  external: ['@opentelemetry/sdk-trace-base', '@opentelemetry/exporter-trace-otlp-http', '@opentelemetry/resources'],
  minifyWhitespace: true,
  logLevel: 'warning',
});
