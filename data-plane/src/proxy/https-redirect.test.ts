import { httpsLocation } from './https-redirect.js';

test.each([
  ['gw.example.com', '/a?b=1', 'https://gw.example.com/a?b=1'],
  ['GW.Example.com:8080', '/', 'https://gw.example.com/'],
  ['gw.example.com.', '/x', 'https://gw.example.com./x'],
  ['10.0.0.1:80', '/x', 'https://10.0.0.1/x'],
  ['[2001:db8::1]:80', '/x', 'https://[2001:db8::1]/x'],
  ['[::1]', '/x', 'https://[::1]/x'],
  ['gw.example.com', undefined, 'https://gw.example.com/'],
  ['gw.example.com', 'http://other.example/p?q=1', 'https://gw.example.com/p?q=1'],
])('Host %j, target %j → %j', (host, target, location) => {
  expect(httpsLocation(host, target)).toBe(location);
});

test.each([
  undefined,
  '',
  'evil.com/x',
  'evil.com@x',
  'a b',
  'a..b',
  '-a.com',
  'a-.com',
  'h:99999x',
  '[::1',
  'x\r\nSet-Cookie: a=1',
  `${'a'.repeat(64)}.com`,
  `${'a.'.repeat(128)}com`,
])('Host %j is refused', (host) => {
  expect(httpsLocation(host, '/')).toBeNull();
});

test('an absolute-form target that does not parse is refused', () => {
  expect(httpsLocation('gw.example.com', 'http://[bad/')).toBeNull();
});
