import type { IncomingMessage } from 'node:http';
import { clientAddress, forwardedForUpstream, originalHost, originalScheme, parseTrustedProxies } from './client-ip.js';

/** A request as node:http hands it over: the socket's peer and the lower-cased headers. */
const request = (peer: string | undefined, headers: Record<string, string | string[]> = {}, encrypted = false) =>
  ({ socket: { remoteAddress: peer, encrypted }, headers }) as unknown as IncomingMessage;

const trusted = parseTrustedProxies('10.0.0.0/8, 2001:db8::/32,192.0.2.7');

describe('clientAddress', () => {
  test.each([
    [
      'no trusted proxies: the peer, whatever the headers say',
      '203.0.113.5',
      { 'x-forwarded-for': '1.1.1.1', 'x-real-ip': '1.1.1.1' },
      '203.0.113.5',
      parseTrustedProxies(''),
    ],
    ['an untrusted peer: the peer', '203.0.113.5', { 'x-forwarded-for': '1.1.1.1' }, '203.0.113.5'],
    ['a trusted peer: the right-most entry', '10.0.0.1', { 'x-forwarded-for': '9.9.9.9, 198.51.100.4' }, '198.51.100.4'],
    ['trusted hops are walked past', '10.0.0.1', { 'x-forwarded-for': '9.9.9.9, 198.51.100.4, 10.2.3.4, 192.0.2.7' }, '198.51.100.4'],
    ['repeated lines are one list', '10.0.0.1', { 'x-forwarded-for': ['9.9.9.9', '198.51.100.4'] }, '198.51.100.4'],
    ['X-Real-IP is never read', '10.0.0.1', { 'x-real-ip': '9.9.9.9' }, '10.0.0.1'],
    ['a trusted peer without the header: the peer', '10.0.0.1', {}, '10.0.0.1'],
    ['every entry trusted: the left-most', '10.0.0.1', { 'x-forwarded-for': '10.9.9.9, 10.0.0.2' }, '10.9.9.9'],
    ['a non-IP entry stops the walk at the last trusted hop', '10.0.0.1', { 'x-forwarded-for': '9.9.9.9, unknown, 10.0.0.2' }, '10.0.0.2'],
    ['an entry with a port is no IP', '10.0.0.1', { 'x-forwarded-for': '198.51.100.4:5555' }, '10.0.0.1'],
    ['IPv6, lower-cased', '2001:db8::1', { 'x-forwarded-for': '2001:DB8:FFFF::9' }, '2001:db8:ffff::9'],
    ['an IPv4-mapped peer counts as IPv4', '::ffff:10.0.0.1', { 'x-forwarded-for': '198.51.100.4' }, '198.51.100.4'],
    ['no peer (closed socket): unknown', undefined, { 'x-forwarded-for': '198.51.100.4' }, 'unknown'],
  ])('%s', (_name, peer, headers, expected, ranges = trusted) => {
    expect(clientAddress(request(peer, headers), ranges)).toBe(expected);
  });
});

describe('what the upstream is told', () => {
  test("an untrusted peer's X-Forwarded-Proto and -Host are replaced by what the gateway knows; X-Forwarded-For is appended to", () => {
    const req = request('203.0.113.5', { host: 'gw.test', 'x-forwarded-for': '1.1.1.1', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'evil.test' });
    expect([forwardedForUpstream(req), originalScheme(req, trusted), originalHost(req, trusted)]).toEqual(['1.1.1.1, 203.0.113.5', 'http', 'gw.test']);
    expect(forwardedForUpstream(request('203.0.113.5'))).toBe('203.0.113.5');
  });
  test("a trusted peer's are kept, the peer appended to X-Forwarded-For", () => {
    const req = request('10.0.0.1', {
      host: 'internal:8080',
      'x-forwarded-for': '198.51.100.4',
      'x-forwarded-proto': 'HTTPS',
      'x-forwarded-host': 'shop.example.com',
    });
    expect([forwardedForUpstream(req), originalScheme(req, trusted), originalHost(req, trusted)]).toEqual([
      '198.51.100.4, 10.0.0.1',
      'https',
      'shop.example.com',
    ]);
  });
  test("a trusted peer's list or unknown values are not believed: the listener's scheme and the Host", () => {
    const req = request('10.0.0.1', { host: 'gw.test', 'x-forwarded-proto': 'https, http', 'x-forwarded-host': 'a b' }, true);
    expect([originalScheme(req, trusted), originalHost(req, trusted)]).toEqual(['https', 'gw.test']);
    expect(originalScheme(request('10.0.0.1', { 'x-forwarded-proto': 'gopher' }), trusted)).toBe('http');
  });
});

describe('parseTrustedProxies', () => {
  test('empty or unset: none', () => {
    expect(parseTrustedProxies(undefined)).toEqual([]);
    expect(parseTrustedProxies(' ')).toEqual([]);
  });
  test.each(['10.0.0.0/33', 'proxy.internal', '10.0.0.0/8,', '1.2.3.4:80'])('"%s" is refused naming the entry', (text) => {
    expect(() => parseTrustedProxies(text)).toThrow(/^TRUSTED_PROXIES: expected IP addresses and CIDR ranges .*, got "[^"]*"$/);
  });
});
