/**
 * Certificate files reloaded without a restart: a complete new pair replaces the old one and is
 * announced; a half-written renewal (key of another certificate, garbage) is refused and the last
 * good pair keeps serving.
 */
import { X509Certificate } from 'node:crypto';
import { copyFile, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createTestCertificates, type CertificateFiles } from '../../test/helpers/test-certificates.js';
import { watchCertificateFiles, type CertificateSet, type CertificateWatcher } from './certificate-files.js';

const NAMES = { cert: 'X_CERT', key: 'X_KEY', ca: 'X_CA' };

let certs: CertificateFiles;
let paths: { cert: string; key: string; ca: string };
let watcher: CertificateWatcher | undefined;

beforeAll(async () => {
  certs = await createTestCertificates();
});
afterAll(() => certs.dispose());

beforeEach(async () => {
  paths = { cert: join(certs.dir, 'live.crt'), key: join(certs.dir, 'live.key'), ca: certs.caCert };
  await copyFile(certs.serverCert, paths.cert);
  await copyFile(certs.serverKey, paths.key);
});
afterEach(() => watcher?.close());

const subject = (set: CertificateSet) => new X509Certificate(set.cert).subject;

test('reads the pair and the CA at start', async () => {
  watcher = watchCertificateFiles(paths, { names: NAMES, intervalMs: 60_000 });
  expect(subject(watcher.current())).toBe('CN=server');
  expect(watcher.current().ca?.equals(await readFile(certs.caCert))).toBe(true);
});

test.each<[string, () => Promise<void>, RegExp]>([
  ['missing certificate', async () => void (paths.cert = join(certs.dir, 'absent.crt')), /^X_CERT: cannot read .*absent\.crt/],
  ['not a certificate', () => writeFile(paths.cert, 'garbage'), /^X_CERT: .* is not a PEM certificate/],
  ['key of another certificate', () => copyFile(certs.clientKey, paths.key), /^X_KEY: .* is not the key of the certificate/],
  ['key not a key', () => writeFile(paths.key, 'garbage'), /^X_KEY: .* is not a PEM private key/],
])('start refuses %s, naming the setting', async (_name, spoil, message) => {
  await spoil();
  expect(() => watchCertificateFiles(paths, { names: NAMES, intervalMs: 60_000 })).toThrow(message);
});

test('reload(): a new complete pair replaces the old one and listeners get it; the same files again are unchanged', async () => {
  watcher = watchCertificateFiles(paths, { names: NAMES, intervalMs: 60_000 });
  const seen: string[] = [];
  watcher.subscribe((set) => seen.push(subject(set)));
  await copyFile(certs.clientCert, paths.cert);
  await copyFile(certs.clientKey, paths.key);
  expect(watcher.reload()).toBe('reloaded');
  expect(subject(watcher.current())).toBe('CN=client');
  expect(seen).toEqual(['CN=client']);
  expect(watcher.reload()).toBe('unchanged');
  expect(seen).toEqual(['CN=client']);
});

test('reload(): a half-written renewal (new certificate, old key) is refused and the old pair stays', async () => {
  watcher = watchCertificateFiles(paths, { names: NAMES, intervalMs: 60_000 });
  await copyFile(certs.clientCert, paths.cert);
  const result = watcher.reload();
  expect(result).toBeInstanceOf(Error);
  expect((result as Error).message).toMatch(/^X_KEY: .* is not the key of the certificate/);
  expect(subject(watcher.current())).toBe('CN=server');
});

test('the interval re-reads the files and reports what it took', async () => {
  const reports: Array<string | Error> = [];
  watcher = watchCertificateFiles(paths, { names: NAMES, intervalMs: 50, onReload: (r) => reports.push(r) });
  await copyFile(certs.clientCert, paths.cert);
  await copyFile(certs.clientKey, paths.key);
  for (let i = 0; i < 100 && !reports.includes('reloaded'); i++) await new Promise((resolve) => setTimeout(resolve, 20));
  // A tick between the two copies sees the new certificate with the old key: refused, and the next tick takes both.
  const before = reports.slice(0, reports.indexOf('reloaded'));
  for (const r of before) expect(String(r)).toMatch(/is not the key of the certificate/);
  expect(reports).toContain('reloaded');
  expect(subject(watcher.current())).toBe('CN=client');
});
