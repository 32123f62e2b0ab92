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
import { bothOrNeither } from './env.js';
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

/** Files read as one set of type T, re-read every interval and on `reload()`. */
export interface FileSetWatcher<T> {
  current(): T;
  /** Re-reads the files now: 'reloaded' (a new valid set), 'unchanged', or the reason it was refused. */
  reload(): 'reloaded' | 'unchanged' | Error;
  /** Called with every new set; returns the unsubscribe function. */
  subscribe(listener: (set: T) => void): () => void;
  close(): void;
}

export type CertificateWatcher = FileSetWatcher<CertificateSet>;

export interface WatchCertificateOptions {
  /** Names of the settings that gave the paths (e.g. GRPC_TLS_CERT), for error messages. */
  names: { cert: string; key: string; ca?: string };
  intervalMs: number;
  /** Told about each periodic reload that took a new set or refused one (SIGHUP callers read reload()). */
  onReload?(result: 'reloaded' | Error): void;
}

/**
 * A certificate and its key named by two settings (GRPC_TLS_CERT / _KEY, PROXY_TLS_CERT / _KEY): both or neither.
 * Null when neither is set; throws a ConfigError naming the one set when only one is.
 */
export function certificatePairFromEnv(env: NodeJS.ProcessEnv, names: { cert: string; key: string }): CertificatePaths | null {
  const pair = bothOrNeither(env, names.cert, names.key);
  return pair && { cert: pair[0], key: pair[1] };
}

function readFile(name: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new Error(`${name}: cannot read ${path}: ${(err as Error).message}`, { cause: err });
  }
}

/** A PEM file of one or more CA certificates (the first must parse); `name` is its setting. */
export function readCaFile(name: string, path: string): Buffer {
  const ca = readFile(name, path);
  try {
    new X509Certificate(ca);
  } catch (err) {
    throw new Error(`${name}: ${path} is not a PEM certificate`, { cause: err });
  }
  return ca;
}

export function readCertificateSet(paths: CertificatePaths, names: WatchCertificateOptions['names']): CertificateSet {
  const set: CertificateSet = { cert: readFile(names.cert, paths.cert), key: readFile(names.key, paths.key) };
  if (paths.ca) set.ca = readCaFile(names.ca ?? 'ca', paths.ca);
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
  return set;
}

/** Same bytes in every member (an absent member equals only an absent one). */
function sameFileSet<T extends object>(a: T, b: T): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  return [...keys].every((key) => {
    const x = (a as Record<string, Buffer | undefined>)[key];
    const y = (b as Record<string, Buffer | undefined>)[key];
    return x === undefined || y === undefined ? x === y : x.equals(y);
  });
}

/** Reads the files once (throws, naming the setting, when they are unusable), then watches them. */
export function watchCertificateFiles(paths: CertificatePaths, options: WatchCertificateOptions): CertificateWatcher {
  return watchFileSet(() => readCertificateSet(paths, options.names), options);
}

/** `read` once (it throws, naming the setting, when the files are unusable), then again every interval and on reload(). */
export function watchFileSet<T extends object>(read: () => T, options: Pick<WatchCertificateOptions, 'intervalMs' | 'onReload'>): FileSetWatcher<T> {
  let current = read();
  const listeners = new Set<(set: T) => void>();

  const reload = (): 'reloaded' | 'unchanged' | Error => {
    let next: T;
    try {
      next = read();
    } catch (err) {
      return err as Error;
    }
    if (sameFileSet(current, next)) return 'unchanged';
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
  else logger.warn({ listener, err: result }, 'certificate reload refused; keeping the previous certificate');
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
