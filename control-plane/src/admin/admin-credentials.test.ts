import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { resolveAdminSecrets, readOrCreateSecret } from './admin-credentials.js';

let dir: string;
let lines: string[];
const capture = (level = 'info') => {
  lines = [];
  return pino(
    { level },
    new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    }),
  );
};

const sources = () => ({
  adminPassword: undefined,
  adminPasswordFile: join(dir, 'admin-password'),
  adminJwtSecret: undefined,
  adminJwtSecretFile: join(dir, 'admin-jwt-secret'),
});

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'gatehouse-secrets-'));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

describe('admin secrets', () => {
  test('unset: generated once into DATA_DIR with mode 0600; the log names the path, never the value', async () => {
    const secrets = await resolveAdminSecrets(sources(), capture());
    expect(secrets.password).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(secrets.jwtSecret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(secrets.password).not.toBe(secrets.jwtSecret);
    for (const file of ['admin-password', 'admin-jwt-secret']) {
      expect((await stat(join(dir, file))).mode & 0o777).toBe(0o600);
    }
    expect((await readFile(join(dir, 'admin-password'), 'utf8')).trim()).toBe(secrets.password);
    const log = lines.join('');
    expect(log).toContain(join(dir, 'admin-password'));
    expect(log).not.toContain(secrets.password);
    expect(log).not.toContain(secrets.jwtSecret);
  });

  test('a DATA_DIR that does not exist yet (STORE=kubernetes keeps nothing else there) is created, mode 0700', async () => {
    const nested = join(dir, 'not', 'yet');
    const secrets = await resolveAdminSecrets(
      { ...sources(), adminPasswordFile: join(nested, 'admin-password'), adminJwtSecretFile: join(nested, 'admin-jwt-secret') },
      capture(),
    );
    expect((await readFile(join(nested, 'admin-password'), 'utf8')).trim()).toBe(secrets.password);
    expect((await stat(nested)).mode & 0o777).toBe(0o700);
  });

  test("the generated password's location is printed at LOG_LEVEL=warn too", async () => {
    await resolveAdminSecrets(sources(), capture('warn'));
    expect(lines.join('')).toContain(join(dir, 'admin-password'));
  });

  test('a restart reuses the generated values', async () => {
    const first = await resolveAdminSecrets(sources(), capture());
    const second = await resolveAdminSecrets(sources(), capture());
    expect(second).toEqual(first);
    expect(lines.join('')).toContain('admin password read from file');
  });

  test('values from the environment win and no file is written', async () => {
    const secrets = await resolveAdminSecrets({ ...sources(), adminPassword: 'from-env', adminJwtSecret: 'x'.repeat(40) }, capture());
    expect(secrets).toEqual({ password: 'from-env', jwtSecret: 'x'.repeat(40) });
    await expect(stat(join(dir, 'admin-password'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  test('concurrent starters agree on one value', async () => {
    const path = join(dir, 'race');
    let n = 0;
    const results = await Promise.all(Array.from({ length: 5 }, () => readOrCreateSecret(path, () => `value-${n++}`)));
    expect(new Set(results.map((r) => r.value)).size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
  });

  test('an empty secret file is an error, not an empty password', async () => {
    await writeFile(join(dir, 'admin-password'), '\n');
    await expect(resolveAdminSecrets(sources(), capture())).rejects.toThrow('is empty');
  });
});
