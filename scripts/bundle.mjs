// Each service as one file, <service>/bundle/main.js: what the image and the Helm chart run (docs/operations.md
// "Data plane memory"). Started from dist/, node resolves, reads and compiles each of ~1,000 files; one file of the
// same code starts sooner, with less CPU (docs/benchmarks.md has the figures).
// Input is tsc's output (run `npm run build`, which runs this after tsc), so a bundle is the code the tests
// run, only joined.
//   node scripts/bundle.mjs [control-plane] [data-plane]      (default: both)
import { readFile } from 'node:fs/promises';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { build } from 'esbuild';

const root = resolve(import.meta.dirname, '..');

/**
 * `new URL('<relative>', import.meta.url)` means "relative to this module's file"; in the bundle
 * import.meta.url is the bundle's, so each such path is rewritten to name the same file from there
 * (gatehouse.proto from proto/dist/grpc.js, package.json from data-plane/dist/main.js, the web console's
 * directory from control-plane/dist/console/console-router.js). The image keeps
 * the tree's layout, so the files are where they are in this checkout.
 */
const moduleRelativeUrls = (bundle) => ({
  name: 'module-relative-urls',
  setup(b) {
    const ours = new RegExp(`^${root.replaceAll(/[.*+?^${}()|[\]\\]/g, '\\$&')}${sep}(proto|control-plane|data-plane)${sep}dist${sep}.*\\.js$`);
    b.onLoad({ filter: ours }, async ({ path }) => {
      const source = await readFile(path, 'utf8');
      if (!source.includes('import.meta.url')) return undefined;
      const contents = source.replaceAll(/new URL\((['"])([^'"]+)\1, import\.meta\.url\)/g, (_, quote, target) => {
        const file = resolve(dirname(path), target);
        const fromBundle = relative(dirname(bundle), file).split(sep).join('/') + (target.endsWith('/') ? '/' : '');
        return `new URL(${quote}${fromBundle}${quote}, import.meta.url)`;
      });
      return { contents, loader: 'js' };
    });
  },
});

const services = process.argv.length > 2 ? process.argv.slice(2) : ['control-plane', 'data-plane'];
// Both at once: esbuild works in its own process, so the second build need not wait for the first.
await Promise.all(
  services.map((service) => {
    const bundle = join(root, service, 'bundle/main.js');
    return build({
      entryPoints: [join(root, service, 'dist/main.js')],
      outfile: bundle,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      // CommonJS packages inside an ES module bundle call require() for node's built-ins.
      banner: { js: "import { createRequire as __gatehouseRequire } from 'node:module'; const require = __gatehouseRequire(import.meta.url);" },
      plugins: [moduleRelativeUrls(bundle)],
      // The OpenTelemetry SDK is imported only with tracing on (proto/src/tracing.ts), so it is left to
      // node_modules: inside, its ~650 KB of source would be held by every process, since V8 keeps a
      // script's source as long as the script. The API stays inside: the proxy's tracer imports it
      // statically, which an external would turn into a load at every start (~30 ms); the SDK's own copy of
      // it shares the bundled one's state through the API's global registration. Without whitespace the
      // DP's file is 2.4 MB instead of 3.4. 10 APIs synced, DP RSS: 88.5–88.9 MiB with the SDK inside,
      // 83.7–84.2 without it and without whitespace, 85.2–86.1 from data-plane/dist (3 alternated runs).
      // Names are kept, so stack traces still name functions.
      external: [
        '@opentelemetry/sdk-trace-base',
        '@opentelemetry/exporter-trace-otlp-proto',
        '@opentelemetry/exporter-trace-otlp-http',
        '@opentelemetry/exporter-trace-otlp-grpc',
        '@opentelemetry/resources',
      ],
      minifyWhitespace: true,
      logLevel: 'warning',
    });
  }),
);
