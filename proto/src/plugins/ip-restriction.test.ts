import { ipRestrictionPlugin, parseIpRange } from './ip-restriction.js';

test.each([
  ['10.0.0.0/8', { address: '10.0.0.0', prefix: 8, family: 'ipv4' }],
  ['192.0.2.7', { address: '192.0.2.7', prefix: 32, family: 'ipv4' }],
  ['0.0.0.0/0', { address: '0.0.0.0', prefix: 0, family: 'ipv4' }],
  ['2001:db8::/32', { address: '2001:db8::', prefix: 32, family: 'ipv6' }],
  ['::1', { address: '::1', prefix: 128, family: 'ipv6' }],
  ['::/0', { address: '::', prefix: 0, family: 'ipv6' }],
])('parseIpRange(%j)', (text, range) => {
  expect(parseIpRange(text)).toEqual(range);
});

test.each(['', '::1%eth0', '[::1]', '1::2::3', '10.0.0.1.', '010.0.0.1', '10.0.0.0/33', '::1/129', '10.0.0.0/', '10.0.0.0/08', '10.0.0.0/-1', '10.0.0.0/8/8', '10.0.0', '256.0.0.1', 'example.com', '10.0.0.0 /8', '*'])(
  'parseIpRange(%j) is null',
  (text) => {
    expect(parseIpRange(text)).toBeNull();
  },
);

test.each([
  [' 10.0.0.1 ', '10.0.0.1'],
  ['2001:DB8::1', '2001:db8::1'],
  ['2001:0db8:0000::0001/64', '2001:db8::1/64'],
  ['::ffff:10.1.2.3', '10.1.2.3'],
  ['::FFFF:10.1.0.0/112', '10.1.0.0/16'],
  ['::ffff:10.1.0.0/96', '10.1.0.0/0'],
])('the entry %j is stored as %j', (entry, stored) => {
  expect(ipRestrictionPlugin.schema.parse({ allow: [entry] }).allow).toEqual([stored]);
});

test('an IPv4-mapped range shorter than /96 spans more than IPv4: kept as the IPv6 range it is', () => {
  expect(ipRestrictionPlugin.schema.parse({ allow: ['::ffff:10.0.0.0/64'] }).allow).toEqual(['::ffff:a00:0/64']);
});

test('at most 1000 entries per list', () => {
  const many = Array.from({ length: 1001 }, (_, i) => `10.0.${i >> 8}.${i & 255}`);
  expect(ipRestrictionPlugin.schema.safeParse({ deny: many.slice(0, 1000) }).success).toBe(true);
  expect(ipRestrictionPlugin.schema.safeParse({ deny: many }).success).toBe(false);
});

test('compile parses every entry once, frozen', () => {
  const compiled = ipRestrictionPlugin.compile(ipRestrictionPlugin.schema.parse({ allow: ['10.0.0.0/8'], deny: ['10.1.0.0/16', '::1'], trust_forward_headers: true }));
  expect(compiled).toEqual({
    allow: [{ address: '10.0.0.0', prefix: 8, family: 'ipv4' }],
    deny: [
      { address: '10.1.0.0', prefix: 16, family: 'ipv4' },
      { address: '::1', prefix: 128, family: 'ipv6' },
    ],
    trustForwardHeaders: true,
  });
  expect(Object.isFrozen(compiled.deny[1])).toBe(true);
});
