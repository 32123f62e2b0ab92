import { hashPassword, parsePasswordHash, verifyPassword } from './password-hash.js';
import { parseBasicAuthCredential } from './definition/basic-auth-credential-schema.js';

const b64 = (n: number) => Buffer.alloc(n, 7).toString('base64url');

describe('password hashes', () => {
  test('a new hash is scrypt$N$r$p$salt$key with a random salt, and verifies only its password', async () => {
    const a = await hashPassword('correct horse');
    const b = await hashPassword('correct horse');
    expect(a).toMatch(/^scrypt\$16384\$8\$1\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
    expect(a).not.toBe(b);
    const parsed = parsePasswordHash(a)!;
    expect(parsed).toMatchObject({ N: 16384, r: 8, p: 1 });
    expect(await verifyPassword('correct horse', parsed)).toBe(true);
    expect(await verifyPassword('correct horsf', parsed)).toBe(false);
    expect(await verifyPassword('', parsed)).toBe(false);
  });

  test.each([
    ['not scrypt', `bcrypt$16384$8$1$${b64(16)}$${b64(32)}`],
    ['N not a power of two', `scrypt$10000$8$1$${b64(16)}$${b64(32)}`],
    ['N over 2^17', `scrypt$262144$8$1$${b64(16)}$${b64(32)}`],
    ['memory over 64 MiB', `scrypt$131072$16$1$${b64(16)}$${b64(32)}`],
    ['N·r·p over 2^20', `scrypt$65536$8$4$${b64(16)}$${b64(32)}`],
    ['r of 0', `scrypt$16384$0$1$${b64(16)}$${b64(32)}`],
    ['a short salt', `scrypt$16384$8$1$${b64(8)}$${b64(32)}`],
    ['a short key', `scrypt$16384$8$1$${b64(16)}$${b64(16)}`],
  ])('%s is refused', (_row, text) => {
    expect(parsePasswordHash(text)).toBeNull();
  });

  test('OWASP-style parameter sets within the bounds are accepted', () => {
    expect(parsePasswordHash(`scrypt$65536$8$2$${b64(16)}$${b64(32)}`)).not.toBeNull();
    expect(parsePasswordHash(`scrypt$16384$8$5$${b64(16)}$${b64(32)}`)).not.toBeNull();
  });
});

describe('stored basic_auth credentials', () => {
  const hash = `scrypt$16384$8$1$${b64(16)}$${b64(32)}`;
  test('keep username and hash, drop anything else (a plaintext password included)', () => {
    expect(parseBasicAuthCredential({ username: 'a@b.c', password_hash: hash, password: 'x' })).toEqual({ username: 'a@b.c', password_hash: hash });
  });

  test.each([
    [{ password_hash: hash }, 'username is required'],
    [{ username: 'a:b', password_hash: hash }, 'username must be 1-128 characters'],
    [{ username: '..', password_hash: hash }, 'username must not be "." or ".."'],
    [{ username: 'a' }, 'password_hash is required'],
    [{ username: 'a', password_hash: 'plain' }, 'password_hash must be an scrypt hash'],
    [{ username: 'a', password_hash: `scrypt$262144$8$1$${b64(16)}$${b64(32)}` }, 'password_hash has scrypt parameters out of bounds'],
  ])('%j → %s', (raw, message) => {
    expect(() => parseBasicAuthCredential(raw)).toThrow(expect.objectContaining({ code: 'VALIDATION_FAILED', message: expect.stringContaining(message) }));
  });
});
