/**
 * TLS to HTTPS upstreams: `UPSTREAM_CA_FILE` adds CA certificates to the ones trusted (Node's bundled
 * roots stay trusted), `UPSTREAM_TLS_CERT` / `UPSTREAM_TLS_KEY` give the client certificate presented to
 * upstreams that ask for one (mutual TLS). The files are re-read every TLS_RELOAD_INTERVAL and on SIGHUP,
 * as the listener's; a new set makes a new secure context, and upstream-pools.ts then closes its pools
 * (their requests in flight finish) so that every new connection uses it.
 *
 * One secure context for every pool rather than `ca` / `cert` / `key` in each pool's connect options:
 * given those, node builds a context per connection, and one holding the bundled roots takes tens of ms of CPU
 * to build.
 */
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';
import { certificatePairFromEnv, readCaFile, readCertificateSet, watchFileSet, type FileSetWatcher } from '#proto/certificate-files';

const UPSTREAM_TLS_NAMES = { ca: 'UPSTREAM_CA_FILE', cert: 'UPSTREAM_TLS_CERT', key: 'UPSTREAM_TLS_KEY' } as const;

export interface UpstreamTlsPaths {
  ca?: string;
  cert?: string;
  key?: string;
}

export interface UpstreamTlsFiles {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
}

/** Null when none of the three is set; throws, naming both, when only one of the certificate and key is. */
export function upstreamTlsFromEnv(env: NodeJS.ProcessEnv): UpstreamTlsPaths | null {
  const pair = certificatePairFromEnv(env, UPSTREAM_TLS_NAMES);
  const ca = env[UPSTREAM_TLS_NAMES.ca] || undefined;
  return pair || ca ? { ...pair, ...(ca && { ca }) } : null;
}

/** The files, checked as the listeners' are (the key is the certificate's, the CA file parses); throws naming the setting. */
function readUpstreamTls(paths: UpstreamTlsPaths): UpstreamTlsFiles {
  return {
    ...(paths.cert && paths.key ? readCertificateSet({ cert: paths.cert, key: paths.key }, UPSTREAM_TLS_NAMES) : {}),
    ...(paths.ca ? { ca: readCaFile(UPSTREAM_TLS_NAMES.ca, paths.ca) } : {}),
  };
}

export function upstreamSecureContext(files: UpstreamTlsFiles): SecureContext {
  return createSecureContext({ ...(files.ca && { ca: [...rootCertificates, files.ca] }), cert: files.cert, key: files.key });
}

export type UpstreamTlsWatcher = FileSetWatcher<UpstreamTlsFiles>;

export function watchUpstreamTls(paths: UpstreamTlsPaths, intervalMs: number, onReload: (result: 'reloaded' | Error) => void): UpstreamTlsWatcher {
  return watchFileSet(() => readUpstreamTls(paths), { intervalMs, onReload });
}
