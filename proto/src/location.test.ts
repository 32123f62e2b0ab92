import { locationOf, parseAuthority } from './location.js';

test.each([
  ['gw.example.com', { hostname: 'gw.example.com', port: null }],
  ['GW.Example.com:8080', { hostname: 'gw.example.com', port: 8080 }],
  ['[2001:DB8::1]:443', { hostname: '[2001:db8::1]', port: 443 }],
  ['10.0.0.1', { hostname: '10.0.0.1', port: null }],
])('parseAuthority(%j)', (host, authority) => {
  expect(parseAuthority(host)).toEqual(authority);
});

test.each([undefined, '', 'a.com:65536', 'a.com:', 'a.com/x', 'a.com?x', 'a.com#x', 'u@a.com', 'a.com\r\nX: 1', 'a.com:80:80'])(
  'parseAuthority(%j) is null',
  (host) => {
    expect(parseAuthority(host)).toBeNull();
  },
);

test.each([
  ['https', 443, 'https://h/p?q'],
  ['http', 80, 'http://h/p?q'],
  ['https', 80, 'https://h:80/p?q'],
  ['http', 8443, 'http://h:8443/p?q'],
  ['https', null, 'https://h/p?q'],
] as const)("the port is left out when it is the scheme's own: %s, %j", (scheme, port, location) => {
  expect(locationOf(scheme, 'h', port, '/p?q')).toBe(location);
});

test('anything but visible ASCII in the path is percent-encoded (UTF-8)', () => {
  expect(locationOf('https', 'h', null, '/a b/é\r\n?x=ü')).toBe('https://h/a%20b/%C3%A9%0D%0A?x=%C3%BC');
});
