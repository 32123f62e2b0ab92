import { compileListenPath } from './listen-path.js';

type Match = { params: Record<string, string>; matched: string } | null;

describe('listen_path segments (what the router indexes on)', () => {
  test.each<[string, string, (string | null)[]]>([
    ['catch-all has none', '/*', []],
    ['root exact path is one empty segment', '/', ['']],
    ['literals only', '/a/b', ['a', 'b']],
    ['wildcard is not a segment', '/a/b/*', ['a', 'b']],
    ['param family member', '/api/{id}/res-7/*', ['api', null, 'res-7']],
    ['regex param', '/api/{id:\\d+}/res', ['api', null, 'res']],
    ['param inside a segment', '/api/v{ver}/x', ['api', null, 'x']],
    ['two params in one segment', '/d/{y}-{m}/x', ['d', null, 'x']],
    ['param first', '/{x}/y', [null, 'y']],
    ['trailing slash is an empty literal', '/u/{id}/', ['u', null, '']],
    ['literal percent-encoding normalised', '/a%7e/{id}/%7E', ['a~', null, '~']],
  ])('%s', (_name, source, segments) => {
    expect(compileListenPath(source).segments).toEqual(segments);
  });
});

describe('listen_path matching (segment scan)', () => {
  test.each<[string, string, string, Match]>([
    ['wildcard without params: prefix itself', '/a/b/*', '/a/b', { params: {}, matched: '/a/b' }],
    ['wildcard without params: prefix and slash', '/a/b/*', '/a/b/', { params: {}, matched: '/a/b' }],
    ['wildcard without params: character prefix only', '/a/b/*', '/a/bc', null],
    ['literal after param: same length, other text', '/u/{id}/ab', '/u/1/ac', null],
    ['literal after param: path segment longer', '/u/{id}/ab', '/u/1/abc', null],
    ['literal after param: path segment shorter', '/u/{id}/ab', '/u/1/a', null],
    ['literal after param: path ends before it', '/u/{id}/ab', '/u/1', null],
    ['exact with param: trailing slash is one more segment', '/u/{id}', '/u/1/', null],
    ['exact with param and trailing slash', '/u/{id}/', '/u/1/', { params: { id: '1' }, matched: '/u/1/' }],
    ['exact with param and trailing slash needs it', '/u/{id}/', '/u/1', null],
    ['wildcard with param: trailing slash', '/p/{s}/*', '/p/x/', { params: { s: 'x' }, matched: '/p/x' }],
    ['wildcard with param: deep rest', '/p/{s}/q/*', '/p/x/q/r/s/t', { params: { s: 'x' }, matched: '/p/x/q' }],
    ['first segment empty', '/u/{id}', '//1', null],
    ['path without leading slash matches nothing', '/u/{id}', 'u/1', null],
    ['plain param: no % means no decoding', '/u/{id}', '/u/a+b', { params: { id: 'a+b' }, matched: '/u/a+b' }],
    ['plain param: decoded %2F is not one segment', '/u/{id}', '/u/a%2Fb', null],
    ['regex param may accept a decoded %2F', '/u/{id:.+}', '/u/a%2Fb', { params: { id: 'a/b' }, matched: '/u/a%2Fb' }],
    ['regex param sees the decoded value', '/u/{id:a b}', '/u/a%20b', { params: { id: 'a b' }, matched: '/u/a%20b' }],
    ['regex param alone is anchored', '/r/{n:\\d+}', '/r/1x', null],
    ['regex param alone matches', '/r/{n:\\d+}', '/r/12', { params: { n: '12' }, matched: '/r/12' }],
    ['param with literal suffix in one segment', '/f/{name}.json', '/f/a.json', { params: { name: 'a' }, matched: '/f/a.json' }],
    ['param with literal suffix needs it', '/f/{name}.json', '/f/a.xml', null],
    ['several params across segments', '/a/{x}/b/{y:\\d+}/*', '/a/1/b/2/c', { params: { x: '1', y: '2' }, matched: '/a/1/b/2' }],
    ['literal percent-encoding compared normalised', '/a%7e/{id}', '/a~/1', { params: { id: '1' }, matched: '/a~/1' }],
  ])('%s', (_name, source, path, expected) => {
    expect(compileListenPath(source).match(path)).toEqual(expected);
  });
});
