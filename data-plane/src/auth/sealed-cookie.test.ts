import { createSecretKey, randomBytes } from 'node:crypto';
import { cookieValue, seal, unseal, withoutCookies } from './sealed-cookie.js';

const key = createSecretKey(randomBytes(32));
const NOW = 1_800_000_000;

test('what is sealed opens with the same key and name until its exp', () => {
  const value = seal(key, 'sid', { sub: 'ada', exp: NOW + 60 });
  expect(value).toMatch(/^[\w-]+$/);
  expect(value).not.toContain(Buffer.from('ada').toString('base64url'));
  expect(unseal(key, 'sid', value, NOW)).toEqual({ sub: 'ada', exp: NOW + 60 });
  expect(unseal(key, 'sid', value, NOW + 60)).toBeNull();
  // A fresh IV each time: two seals of one payload differ.
  expect(seal(key, 'sid', { sub: 'ada', exp: NOW + 60 })).not.toBe(value);
});

test('a changed byte, another key, another cookie name or a truncated value is refused', () => {
  const value = seal(key, 'sid', { sub: 'ada', exp: NOW + 60 });
  const raw = Buffer.from(value, 'base64url');
  for (let i = 0; i < raw.length; i += 7) {
    const tampered = Buffer.from(raw);
    tampered[i] ^= 1;
    expect(unseal(key, 'sid', tampered.toString('base64url'), NOW)).toBeNull();
  }
  expect(unseal(createSecretKey(randomBytes(32)), 'sid', value, NOW)).toBeNull();
  expect(unseal(key, 'sid_flow', value, NOW)).toBeNull();
  expect(unseal(key, 'sid', value.slice(0, 30), NOW)).toBeNull();
  expect(unseal(key, 'sid', null, NOW)).toBeNull();
  expect(unseal(key, 'sid', 'x'.repeat(5000), NOW)).toBeNull();
});

test('a payload without a numeric exp never opens', () => {
  expect(unseal(key, 'sid', seal(key, 'sid', { exp: 'later' as unknown as number }), NOW)).toBeNull();
});

test('cookies are read by exact name and ours are taken out of the Cookie header, the others kept in order', () => {
  expect(cookieValue('a=1; sid=abc; sid_flow=def', 'sid')).toBe('abc');
  expect(cookieValue('xsid=1', 'sid')).toBeNull();
  expect(withoutCookies('theme=dark; sid=abc;lang=en; sid_flow=x', new Set(['sid', 'sid_flow']))).toBe('theme=dark; lang=en');
  expect(withoutCookies('sid=abc', new Set(['sid']))).toBeNull();
});
