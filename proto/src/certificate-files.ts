/**
 * TLS certificate, key and CA files that are reloaded without a restart: re-read every
 * `intervalMs` and on demand (`reload()`, which main.ts calls on SIGHUP). A new set replaces the
 * old one only when it is complete and consistent (the certificate parses, the key is its key, the
 * CA parses), so a renewal caught half-written keeps the last good set serving until the next try.
 * Listeners (the gRPC server, the admin HTTPS server) apply it to new connections; open
 * connections keep the certificate they were made with.
 */
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Logger } from './logger.js';

export interface CertificatePaths {
  cert: string;
  key: string;
  ca?: string;
}

export interface CertificateSet {
  cert: Buffer;
  key: Buffer;
  ca?: Buffer;
}

export interface CertificateWatcher {
  current(): CertificateSet;
  /** Re-reads the files now: 'reloaded' (a new valid set), 'unchanged', or the reason it was refused. */
  reload(): 'reloaded' | 'unchanged' | Error;
  /** Called with every new set; returns the unsubscribe function. */
  subscribe(listener: (set: CertificateSet) => void): () => void;
  close(): void;
}

export interface WatchCertificateOptions {
  /** Names of the settings that gave the paths (e.g. GRPC_TLS_CERT), for error messages. */
  names: { cert: string; key: string; ca?: string };
  intervalMs: number;
  /** Told about each periodic reload that took a new set or refused one (SIGHUP callers read reload()). */
  onReload?(result: 'reloaded' | Error): void;
}

/**
 * A certificate and its key named by two settings (GRPC_TLS_CERT / _KEY, PROXY_TLS_CERT / _KEY): both or neither.
 * Null when neither is set; throws, naming both, when only one is.
 */
export function certificatePairFromEnv(env: NodeJS.ProcessEnv, names: { cert: string; key: string }): CertificatePaths | null {
  const cert = env[names.cert] || undefined;
  const key = env[names.key] || undefined;
  if (!cert !== !key) throw new Error(`${names.cert} and ${names.key} must be set together`);
  return cert && key ? { cert, key } : null;
}

function readSet(paths: CertificatePaths, names: WatchCertificateOptions['names']): CertificateSet {
  const read = (kind: 'cert' | 'key' | 'ca', path: string): Buffer => {
    try {
      return readFileSync(path);
    } catch (err) {
      throw new Error(`${names[kind] ?? kind}: cannot read ${path}: ${(err as Error).message}`, { cause: err });
    }
  };
  const set: CertificateSet = { cert: read('cert', paths.cert), key: read('key', paths.key) };
  if (paths.ca) set.ca = read('ca', paths.ca);
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(set.cert);
  } catch (err) {
    throw new Error(`${names.cert}: ${paths.cert} is not a PEM certificate`, { cause: err });
  }
  let matches: boolean;
  try {
    matches = certificate.checkPrivateKey(createPrivateKey(set.key));
  } catch (err) {
    throw new Error(`${names.key}: ${paths.key} is not a PEM private key`, { cause: err });
  }
  if (!matches) throw new Error(`${names.key}: ${paths.key} is not the key of the certificate in ${paths.cert}`);
  if (set.ca) {
    try {
      new X509Certificate(set.ca);
    } catch (err) {
      throw new Error(`${names.ca}: ${paths.ca} is not a PEM certificate`, { cause: err });
    }
  }
  return set;
}

const sameSet = (a: CertificateSet, b: CertificateSet): boolean =>
  a.cert.equals(b.cert) && a.key.equals(b.key) && (a.ca === undefined ? b.ca === undefined : b.ca !== undefined && a.ca.equals(b.ca));

/** Reads the files once (throws, naming the setting, when they are unusable), then watches them. */
export function watchCertificateFiles(paths: CertificatePaths, options: WatchCertificateOptions): CertificateWatcher {
  let current = readSet(paths, options.names);
  const listeners = new Set<(set: CertificateSet) => void>();

  const reload = (): 'reloaded' | 'unchanged' | Error => {
    let next: CertificateSet;
    try {
      next = readSet(paths, options.names);
    } catch (err) {
      return err as Error;
    }
    if (sameSet(current, next)) return 'unchanged';
    current = next;
    for (const listener of listeners) listener(next);
    return 'reloaded';
  };

  const timer = setInterval(() => {
    const result = reload();
    if (result !== 'unchanged') options.onReload?.(result);
  }, options.intervalMs);
  timer.unref();

  return {
    current: () => current,
    reload,
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close() {
      clearInterval(timer);
      listeners.clear();
    },
  };
}

/** One log line per reload of a listener's certificates: taken, unchanged, or refused (the previous set keeps serving). */
export function logCertificateReload(logger: Pick<Logger, 'info' | 'warn'>, listener: string, result: 'reloaded' | 'unchanged' | Error): void {
  if (result === 'reloaded') logger.info({ listener }, 'certificates reloaded');
  else if (result === 'unchanged') logger.info({ listener }, 'certificates unchanged');
  else logger.warn({ listener, err: result.message }, 'certificate reload refused; keeping the previous certificate');
}

/** A listener's certificate files, re-read every `intervalMs` (TLS_RELOAD_INTERVAL) and on SIGHUP (the caller's reload()); each periodic reload is logged. */
export function watchListenerCertificates(
  listener: string,
  paths: CertificatePaths,
  names: WatchCertificateOptions['names'],
  intervalMs: number,
  logger: Pick<Logger, 'info' | 'warn'>,
): CertificateWatcher {
  return watchCertificateFiles(paths, { names, intervalMs, onReload: (result) => logCertificateReload(logger, listener, result) });
}
