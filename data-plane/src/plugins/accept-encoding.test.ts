import { negotiateEncoding } from './accept-encoding.js';

const BOTH = { br: true, gzip: true };

test.each([
  ['absent', undefined, BOTH, null],
  ['empty', '', BOTH, null],
  ['gzip', 'gzip', BOTH, 'gzip'],
  ['x-gzip counts as gzip', 'x-gzip', BOTH, 'gzip'],
  ['br', 'br', BOTH, 'br'],
  ['browser default: br preferred when equal', 'gzip, deflate, br, zstd', BOTH, 'br'],
  ['case-insensitive', 'GZIP, BR', BOTH, 'br'],
  ['higher q wins', 'br;q=0.5, gzip;q=0.8', BOTH, 'gzip'],
  ['q with spaces and upper-case Q', 'br ; Q=0.9, gzip ; q = 0.2', BOTH, 'br'],
  ['q=0 refuses a coding', 'br;q=0, gzip', BOTH, 'gzip'],
  ['all refused', 'br;q=0, gzip;q=0', BOTH, null],
  ['only deflate', 'deflate', BOTH, null],
  ['* accepts both, br first', '*', BOTH, 'br'],
  ['* with a named coding refused', '*, br;q=0', BOTH, 'gzip'],
  ['*;q=0 refuses everything unnamed', 'gzip;q=0.3, *;q=0', BOTH, 'gzip'],
  ['*;q=0 alone', '*;q=0', BOTH, null],
  ['identity;q=0 asks for compression', 'identity;q=0, gzip', BOTH, 'gzip'],
  ['identity weighed above every coding', 'identity, gzip;q=0.5', BOTH, null],
  ['identity weighed equal: compress', 'identity;q=0.5, gzip;q=0.5', BOTH, 'gzip'],
  ['identity alone', 'identity', BOTH, null],
  ['invalid q ignored (entry dropped)', 'br;q=2, gzip', BOTH, 'gzip'],
  ['invalid q text ignored', 'br;q=abc', BOTH, null],
  ['too many q decimals ignored', 'br;q=0.5555, gzip;q=0.1', BOTH, 'gzip'],
  ['empty entries ignored', ' , ,gzip,', BOTH, 'gzip'],
  ['br not offered', 'br, gzip;q=0.1', { br: false, gzip: true }, 'gzip'],
  ['br not offered, only br accepted', 'br', { br: false, gzip: true }, null],
  ['gzip not offered', 'gzip', { br: true, gzip: false }, null],
] as const)('%s: %j', (_row, header, offered, expected) => {
  expect(negotiateEncoding(header, offered)).toBe(expected);
});
