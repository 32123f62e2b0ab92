import { addressWords, inRanges, ipRestrictionPlugin, parseIpRange } from './ip-restriction.js';

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

test.each([
  '',
  '::1%eth0',
  '[::1]',
  '1::2::3',
  '10.0.0.1.',
  '010.0.0.1',
  '10.0.0.0/33',
  '::1/129',
  '10.0.0.0/',
  '10.0.0.0/08',
  '10.0.0.0/-1',
  '10.0.0.0/8/8',
  '10.0.0',
  '256.0.0.1',
  'example.com',
  '10.0.0.0 /8',
  '*',
])('parseIpRange(%j) is null', (text) => {
  expect(parseIpRange(text)).toBeNull();
});

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

test('compile turns every entry into a range of the IPv6 space, IPv4 as IPv4-mapped, frozen; trust_forward_headers is accepted and has no effect', () => {
  const compiled = ipRestrictionPlugin.compile(
    ipRestrictionPlugin.schema.parse({ allow: ['10.0.0.0/8'], deny: ['10.1.0.0/16', '::1'], trust_forward_headers: true }),
  );
  expect(compiled).toEqual({
    allow: [{ words: [0, 0, 0xffff, 0x0a000000], prefix: 104 }],
    deny: [
      { words: [0, 0, 0xffff, 0x0a010000], prefix: 112 },
      { words: [0, 0, 0, 1], prefix: 128 },
    ],
  });
  expect(Object.isFrozen(compiled.deny[1])).toBe(true);
});

test.each([
  ['10.1.2.3', [0, 0, 0xffff, 0x0a010203]],
  ['255.255.255.255', [0, 0, 0xffff, 0xffffffff]],
  ['::', [0, 0, 0, 0]],
  ['::1', [0, 0, 0, 1]],
  ['2001:db8::', [0x20010db8, 0, 0, 0]],
  ['2001:db8:0:0:1:0:0:1', [0x20010db8, 0, 0x00010000, 1]],
  ['1:2:3:4:5:6:7:8', [0x00010002, 0x00030004, 0x00050006, 0x00070008]],
  ['1::8', [0x00010000, 0, 0, 8]],
  ['::ffff:10.0.0.1', [0, 0, 0xffff, 0x0a000001]],
  ['64:ff9b::192.0.2.33', [0x0064ff9b, 0, 0, 0xc0000221]],
  ['FE80::A', [0xfe800000, 0, 0, 10]],
])('addressWords(%j)', (text, words) => {
  expect(addressWords(text)).toEqual(words);
});

test.each([
  '',
  'unknown',
  '1.2.3',
  '1.2.3.256',
  '1.2.3.4.5',
  '1::2::3',
  '1:2:3:4:5:6:7:8:9',
  '1:2:3:4:5:6:7',
  '12345::',
  'g::1',
  '::1.2.3',
  ':1::',
  '1:2:3:4:5:6:7::8',
])('addressWords(%j) is null', (text) => {
  expect(addressWords(text)).toBeNull();
});

test('inRanges: a prefix compares that many leading bits; /0 holds everything', () => {
  const range = (text: string) => ipRestrictionPlugin.compile(ipRestrictionPlugin.schema.parse({ allow: [text] })).allow[0]!;
  const inside = (address: string, ...texts: string[]) => inRanges(addressWords(address)!, texts.map(range));
  expect(inside('10.255.0.1', '10.0.0.0/8')).toBe(true);
  expect(inside('11.0.0.1', '10.0.0.0/8')).toBe(false);
  expect(inside('10.0.0.1', '10.0.0.1')).toBe(true);
  expect(inside('10.0.0.2', '10.0.0.1')).toBe(false);
  expect(inside('10.0.0.1', '192.0.2.0/24', '10.0.0.0/31')).toBe(true);
  expect(inside('2001:db8:ffff::1', '2001:db8::/32')).toBe(true);
  expect(inside('2001:db9::1', '2001:db8::/32')).toBe(false);
  expect(inside('2001:db8::1', '0.0.0.0/0')).toBe(false);
  expect(inside('10.0.0.1', '::/0')).toBe(true);
  expect(inside('10.0.0.1', '2001:db8::/32')).toBe(false);
  expect(inside('128.0.0.1', '128.0.0.0/1')).toBe(true);
  expect(inside('127.255.255.255', '128.0.0.0/1')).toBe(false);
});
