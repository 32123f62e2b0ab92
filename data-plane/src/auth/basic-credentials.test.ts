import { hashPassword, parsePasswordHash, type PasswordHash } from '#proto/password-hash';
import { BUSY, createBasicAuthChecker, parseBasicAuthorization } from './basic-credentials.js';

const basic = (credentials: string) => `Basic ${Buffer.from(credentials).toString('base64')}`;
let users: Map<string, PasswordHash>;

beforeAll(async () => {
  users = new Map([['alice', parsePasswordHash(await hashPassword('alice password'))!]]);
});

describe('Authorization: Basic parsing', () => {
  test.each([
    ['user and password', basic('alice:pw'), { username: 'alice', password: 'pw' }],
    ['a password holding colons', basic('alice:a:b'), { username: 'alice', password: 'a:b' }],
    ['a lower-case scheme', `basic ${Buffer.from('alice:pw').toString('base64')}`, { username: 'alice', password: 'pw' }],
    ['UTF-8', basic('zoë:pässwörd'), { username: 'zoë', password: 'pässwörd' }],
    ['no header', undefined, null],
    ['another scheme', 'Bearer abc', null],
    ['no colon', basic('alice'), null],
    ['an empty username', basic(':pw'), null],
    ['not base64', 'Basic !!!', null],
    ['an oversized value', basic(`alice:${'x'.repeat(2000)}`), null],
  ])('%s', (_row, header, expected) => {
    expect(parseBasicAuthorization(header)).toEqual(expected);
  });
});

describe('basic_auth checker', () => {
  test('a verdict already known is answered at once (the username, or null), a fresh one as a promise', async () => {
    const checker = createBasicAuthChecker();
    const fresh = checker.check(users, basic('alice:alice password'));
    expect(fresh).toBeInstanceOf(Promise);
    expect(await fresh).toBe('alice');
    expect(checker.check(users, basic('alice:alice password'))).toBe('alice');
    expect(await checker.check(users, basic('alice:wrong'))).toBeNull();
    expect(checker.check(users, basic('alice:wrong'))).toBeNull();
    expect(checker.check(users, 'Bearer abc')).toBeNull();
  });

  test('the right password gives the username, anything else null', async () => {
    const checker = createBasicAuthChecker();
    expect(await checker.check(users, basic('alice:alice password'))).toBe('alice');
    expect(await checker.check(users, basic('alice:wrong'))).toBeNull();
    expect(await checker.check(users, basic('bob:alice password'))).toBeNull();
    expect(await checker.check(users, undefined)).toBeNull();
  });

  test('a cached success does not outlive a password change nor a delete', async () => {
    const checker = createBasicAuthChecker();
    expect(await checker.check(users, basic('alice:alice password'))).toBe('alice');
    const changed = new Map([['alice', parsePasswordHash(await hashPassword('new password'))!]]);
    expect(await checker.check(changed, basic('alice:alice password'))).toBeNull();
    expect(await checker.check(changed, basic('alice:new password'))).toBe('alice');
    expect(await checker.check(new Map(), basic('alice:new password'))).toBeNull();
  });

  test('verdicts are cached: a repeated check takes no scrypt (far under its cost)', async () => {
    const checker = createBasicAuthChecker();
    await checker.check(users, basic('alice:alice password'));
    await checker.check(users, basic('alice:wrong'));
    const start = process.hrtime.bigint();
    for (let i = 0; i < 200; i++) {
      await checker.check(users, basic('alice:alice password'));
      await checker.check(users, basic('alice:wrong'));
    }
    // 400 scrypt runs would take seconds.
    expect(Number(process.hrtime.bigint() - start) / 1e6).toBeLessThan(500);
  });

  test('beyond maxPending concurrent fresh checks, the extra ones are BUSY (not judged, never null), cached ones still pass', async () => {
    const checker = createBasicAuthChecker({ maxPending: 2, maxPendingPerUser: 2 });
    await checker.check(users, basic('alice:alice password'));
    const fresh = [1, 2, 3, 4].map((i) => checker.check(users, basic(`alice:guess ${i}`)));
    expect(fresh.slice(2)).toEqual([BUSY, BUSY]);
    expect(await Promise.all(fresh.slice(0, 2))).toEqual([null, null]);
    const mixed = await Promise.all([
      checker.check(users, basic('alice:guess 5')),
      checker.check(users, basic('alice:guess 6')),
      checker.check(users, basic('alice:alice password')),
    ]);
    expect(mixed).toEqual([null, null, 'alice']);
  });

  test('a correct, uncached password during a flood of wrong ones: BUSY or the username, never null', async () => {
    const checker = createBasicAuthChecker({ maxPending: 2, maxPendingPerUser: 2 });
    const flood = [1, 2].map((i) => checker.check(users, basic(`alice:guess ${i}`)));
    expect(checker.check(users, basic('alice:alice password'))).toBe(BUSY);
    await Promise.all(flood);
    expect(await checker.check(users, basic('alice:alice password'))).toBe('alice');
  });

  test('a flood aimed at one user (or at unknown names) leaves room for the others', async () => {
    const two = new Map([...users, ['bob', parsePasswordHash(await hashPassword('bob password'))!]]);
    const checker = createBasicAuthChecker({ maxPending: 8, maxPendingPerUser: 2 });
    const flood = [1, 2, 3].map((i) => checker.check(two, basic(`alice:guess ${i}`)));
    const unknown = [1, 2, 3].map((i) => checker.check(two, basic(`nobody-${i}:guess`)));
    expect([flood[2], unknown[2]]).toEqual([BUSY, BUSY]);
    expect(await checker.check(two, basic('bob:bob password'))).toBe('bob');
    await Promise.all([...flood, ...unknown]);
  });
});
