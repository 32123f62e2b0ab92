import { alternativeNames, element } from './client-certificate.js';

test.each<[string | undefined, Array<[string, string]>]>([
  [undefined, []],
  ['', []],
  ['DNS:a.example', [['DNS', 'a.example']]],
  [
    'URI:spiffe://td/ns/x/sa/y, DNS:a.example, IP Address:10.0.0.1, email:x@y',
    [
      ['URI', 'spiffe://td/ns/x/sa/y'],
      ['DNS', 'a.example'],
    ],
  ],
  // node writes a name holding a comma (or other specials) JSON-quoted
  [
    'URI:"spiffe://td/a,b", DNS:c.example',
    [
      ['URI', 'spiffe://td/a,b'],
      ['DNS', 'c.example'],
    ],
  ],
])('subjectAltName %j gives %j', (san, names) => {
  expect(alternativeNames(san)).toEqual(names);
});

test.each([
  ['spiffe://td/ns/x', 'spiffe://td/ns/x'],
  ['a,b', '"a,b"'],
  ['a;b=c', '"a;b=c"'],
  ['say "hi"', '"say \\"hi\\""'],
])('an XFCC element %j is written %j', (value, written) => {
  expect(element(value)).toBe(written);
});
