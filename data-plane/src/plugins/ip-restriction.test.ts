import type { IncomingMessage } from 'node:http';
import { BlockList, isIP } from 'node:net';
import fc from 'fast-check';
import { isGatehouseError } from '#proto/errors';
import { ipRestrictionPlugin } from '#proto/plugins/ip-restriction';
import { ipRestrictionRuntime } from './ip-restriction.js';
import type { PluginExchange } from './pipeline.js';
import type { StageDeps } from './runtime.js';
import { parseTrustedProxies } from './client-ip.js';

/** The verdict of the plugin's request hook for a client at `remoteAddress` with `headers`: 'pass' or the error code. */
function verdict(config: unknown, remoteAddress: string | undefined, headers: Record<string, string> = {}, trustedProxies = ''): string {
  const deps = { trustedProxies: parseTrustedProxies(trustedProxies) } as StageDeps;
  const stage = ipRestrictionRuntime.stage(ipRestrictionPlugin.compile(ipRestrictionPlugin.schema.parse(config)), deps);
  const req = { socket: { remoteAddress }, headers } as unknown as IncomingMessage;
  try {
    stage.request!({ req } as PluginExchange);
    return 'pass';
  } catch (err) {
    if (isGatehouseError(err)) return err.code;
    throw err;
  }
}

test.each([
  ['an address in an allowed range', { allow: ['10.0.0.0/8'] }, '10.1.2.3', 'pass'],
  ['an address outside every allowed range', { allow: ['10.0.0.0/8', '192.168.0.0/16'] }, '172.16.0.1', 'IP_FORBIDDEN'],
  ['a denied address', { deny: ['10.1.2.3'] }, '10.1.2.3', 'IP_FORBIDDEN'],
  ['an address next to a denied one', { deny: ['10.1.2.3'] }, '10.1.2.4', 'pass'],
  ['deny wins over allow', { allow: ['10.0.0.0/8'], deny: ['10.1.0.0/16'] }, '10.1.2.3', 'IP_FORBIDDEN'],
  ['an IPv4 client on a dual-stack socket matches its IPv4 range', { allow: ['10.0.0.0/8'] }, '::ffff:10.1.2.3', 'pass'],
  ['an IPv6 client in an IPv6 range', { allow: ['2001:db8::/32'] }, '2001:DB8:0:1::5', 'pass'],
  ['an IPv6 client is in no IPv4 range', { allow: ['0.0.0.0/0'] }, '2001:db8::5', 'IP_FORBIDDEN'],
  ['an IPv4 client is in no IPv6 range but those holding IPv4-mapped addresses', { deny: ['2001:db8::/32'] }, '10.0.0.1', 'pass'],
  ['an IPv6 range holding the IPv4-mapped addresses holds IPv4 clients', { deny: ['::/0'] }, '10.0.0.1', 'IP_FORBIDDEN'],
  ['a client without an address is in no allow list', { allow: ['0.0.0.0/0', '::/0'] }, undefined, 'IP_FORBIDDEN'],
  ['a client without an address is in no deny list', { deny: ['0.0.0.0/0', '::/0'] }, undefined, 'pass'],
])('%s', (_name, config, address, expected) => {
  expect(verdict(config, address)).toBe(expected);
});

test('behind TRUSTED_PROXIES: the right-most X-Forwarded-For entry not among them; X-Real-IP never counts', () => {
  const config = { allow: ['203.0.113.0/24'] };
  const behind = (headers: Record<string, string>, peer = '10.0.0.1') => verdict(config, peer, headers, '10.0.0.0/8');
  expect(behind({ 'x-forwarded-for': '198.51.100.1, 203.0.113.9' })).toBe('pass');
  expect(behind({ 'x-forwarded-for': '203.0.113.9, 198.51.100.1' })).toBe('IP_FORBIDDEN');
  expect(behind({ 'x-forwarded-for': '203.0.113.9, 198.51.100.1, 10.0.0.7' })).toBe('IP_FORBIDDEN');
  expect(behind({ 'x-forwarded-for': 'not-an-ip', 'x-real-ip': '203.0.113.9' })).toBe('IP_FORBIDDEN');
  // A peer outside TRUSTED_PROXIES is the client, whatever it forwards.
  expect(behind({ 'x-forwarded-for': '203.0.113.9' }, '198.51.100.1')).toBe('IP_FORBIDDEN');
});

test('trust_forward_headers is accepted and has no effect: without TRUSTED_PROXIES the peer is the client', () => {
  const config = { allow: ['203.0.113.0/24'], trust_forward_headers: true };
  expect(verdict(config, '10.0.0.1', { 'x-forwarded-for': '203.0.113.9' })).toBe('IP_FORBIDDEN');
  expect(verdict(config, '10.0.0.1', { 'x-real-ip': '203.0.113.9' })).toBe('IP_FORBIDDEN');
  expect(verdict(config, '203.0.113.1')).toBe('pass');
});

test('the matcher agrees with node:net BlockList over generated addresses and ranges', () => {
  const v4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((p) => p.join('.'));
  const v6 = fc.array(fc.nat(0xffff), { minLength: 8, maxLength: 8 }).map((g) => g.map((x) => x.toString(16)).join(':'));
  // Addresses near each other, so that ranges hold some of them.
  const address = fc.oneof(v4, v6, fc.constantFrom('10.0.0.1', '10.1.2.3', '::1', '2001:db8::1', '::ffff:10.0.0.1'));
  const range = fc.oneof(
    fc.tuple(v4, fc.nat(32)).map(([a, p]) => ({ address: a, prefix: p, family: 'ipv4' as const })),
    fc.tuple(v6, fc.nat(128)).map(([a, p]) => ({ address: a, prefix: p, family: 'ipv6' as const })),
    fc.constantFrom(
      { address: '10.0.0.0', prefix: 8, family: 'ipv4' as const },
      { address: '::', prefix: 0, family: 'ipv6' as const },
      { address: '2001:db8::', prefix: 32, family: 'ipv6' as const },
    ),
  );
  fc.assert(
    fc.property(address, fc.array(range, { minLength: 1, maxLength: 4 }), (client, ranges) => {
      const list = new BlockList();
      for (const r of ranges) list.addSubnet(r.address, r.prefix, r.family);
      const config = { allow: ranges.map((r) => `${r.address}/${r.prefix}`) };
      const canonical = client.startsWith('::ffff:') ? client.slice(7) : client;
      const expected = list.check(canonical, isIP(canonical) === 6 ? 'ipv6' : 'ipv4') ? 'pass' : 'IP_FORBIDDEN';
      expect(verdict(config, client)).toBe(expected);
    }),
    { numRuns: 2000 },
  );
});
