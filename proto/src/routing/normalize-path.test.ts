import { ambiguousPathForm, hasEncodedSlash, normalizePath } from './index.js';

describe('normalizePath', () => {
  test.each([
    ['plain path unchanged', '/foo/bar', '/foo/bar'],
    ['root', '/', '/'],
    ['empty becomes /', '', '/'],
    ['missing leading slash added', 'foo', '/foo'],
    ['trailing slash kept', '/foo/', '/foo/'],
    ['.. climbs one segment', '/public/../private/x', '/private/x'],
    ['. is dropped', '/a/./b', '/a/b'],
    ['.. never goes above the root', '/../../etc/passwd', '/etc/passwd'],
    ['trailing .. keeps the slash', '/a/b/..', '/a/'],
    ['trailing . keeps the slash', '/a/b/.', '/a/b/'],
    ['lower-case %2e%2e is a dot segment', '/public/%2e%2e/private/x', '/private/x'],
    ['upper-case %2E%2E is a dot segment', '/public/%2E%2E/private/x', '/private/x'],
    ['mixed .%2e is a dot segment', '/public/.%2e/private/x', '/private/x'],
    ['%2e alone is a dot segment', '/a/%2e/b', '/a/b'],
    ['dots inside a segment are literal', '/a/..b/c..', '/a/..b/c..'],
    ['three dots are a normal segment', '/a/.../b', '/a/.../b'],
    ['duplicate slashes collapse', '//private//x', '/private/x'],
    ['duplicate slashes then ..', '/public//../private', '/private'],
    ['encoded unreserved chars decoded', '/%70rivate/%7Euser', '/private/~user'],
    ['encoded slash kept (not a separator)', '/a%2fb/..', '/'],
    ['escapes upper-cased', '/a%2fb', '/a%2Fb'],
    ['reserved escapes kept', '/a%3Fb%23c', '/a%3Fb%23c'],
    ['stray % encoded', '/a%zz/b%4', '/a%25zz/b%254'],
    ['decoding never assembles a new escape', '/public/%%32%65%%32%65/private', '/public/%252e%252e/private'],
    ['utf-8 escapes kept', '/caf%c3%a9', '/caf%C3%A9'],
  ])('%s: %s → %s', (_name, input, expected) => {
    expect(normalizePath(input)).toBe(expected);
  });

  // Paths with no `%`, `//` or `/.` are returned as they are (fast path); these rows pin that the
  // results are the ones of the full normalisation, on both sides of the fast path's condition.
  test.each([
    ['fast path: plain path', '/api/v1/users', '/api/v1/users'],
    ['fast path: dots inside segments', '/a.b/c.json', '/a.b/c.json'],
    ['fast path: dots ending a segment', '/a/b..', '/a/b..'],
    ['fast path: trailing slash', '/a/b/', '/a/b/'],
    ['full path: segment starting with a dot is kept', '/.well-known/acme', '/.well-known/acme'],
    ['full path: hidden file segment is kept', '/a/.env', '/a/.env'],
    ['full path: dot-prefixed segments are kept', '/a/.b/..c', '/a/.b/..c'],
    ['full path: trailing /. keeps the slash', '/a/.', '/a/'],
    ['full path: trailing /.. climbs', '/a/..', '/'],
    ['full path: /.. alone', '/..', '/'],
    ['full path: /./ alone', '/./', '/'],
    ['full path: // alone', '//', '/'],
    ['full path: trailing // collapses', '/a/b//', '/a/b/'],
    ['full path: no leading slash', 'a/b', '/a/b'],
    ['full path: encoded letter decoded', '/%41', '/A'],
    ['full path: encoded dot segment at the end', '/a/%2e', '/a/'],
    ['full path: dots before an encoded slash are no segment', '/a/..%2F', '/a/..%2F'],
    ['full path: trailing stray %', '/a/b%', '/a/b%25'],
  ])('%s: %s → %s', (_name, input, expected) => {
    expect(normalizePath(input)).toBe(expected);
  });

  test.each([['/public/../private/x'], ['//a/./b/../c/'], ['/%2e%2e/%2E/x'], ['/a%2fb'], ['/%%32%65%%32%65/x']])('idempotent on %s', (p) => {
    expect(normalizePath(normalizePath(p))).toBe(normalizePath(p));
  });
});

describe('ambiguousPathForm (refused on every route) and hasEncodedSlash (refused unless the API allows it)', () => {
  test.each([
    ['a raw backslash', '/plain/..\\jwt/x', 'a backslash'],
    ['a lone backslash', '/a\\b', 'a backslash'],
    ['..; climbs on Tomcat and Jetty', '/plain/..;/jwt/x', 'a dot segment with parameters'],
    ['.; with parameters', '/plain/.;x=1/jwt', 'a dot segment with parameters'],
    ['..%3B', '/plain/..%3B/jwt', 'a dot segment with parameters'],
    ['%2e%2e; decoded to ..;', '/plain/%2e%2e;/jwt', 'a dot segment with parameters'],
    ['..; at the start', '/..;/jwt', 'a dot segment with parameters'],
    ['.. between encoded slashes', '/plain/a%2F..%2Fjwt', 'a dot segment between encoded slashes'],
    ['.. after an encoded backslash', '/plain/a%5C..%5Cjwt', 'a dot segment between encoded slashes'],
    ['..%2F at a segment start', '/plain/..%2Fjwt', 'a dot segment between encoded slashes'],
    ['%2e%2e%2f in lower case', '/plain/%2e%2e%2fjwt', 'a dot segment between encoded slashes'],
  ])('refuses %s: %s', (_name, raw, why) => {
    expect(ambiguousPathForm(normalizePath(raw))).toBe(why);
  });

  test.each([
    ['a plain path', '/a/b'],
    ['matrix parameters on an ordinary segment', '/a;jsessionid=1/b'],
    ['dots inside a segment before ;', '/a/..b;x/c'],
    ['an encoded slash alone', '/files/a%2Fb'],
    ['an encoded semicolon in a name', '/a%3Bb'],
    ['dot-prefixed names beside encoded slashes', '/a%2F.well-known%2F..b'],
  ])('lets %s through: %s', (_name, raw) => {
    expect(ambiguousPathForm(normalizePath(raw))).toBeNull();
  });

  test.each([
    ['/files/a%2Fb', true],
    ['/files/a%2fb', true],
    ['/files/a%5Cb', true],
    ['/files/a%5cb', true],
    ['/files/a%252Fb', false],
    ['/files/a/b', false],
  ])('hasEncodedSlash(normalizePath(%s)) is %s', (raw, expected) => {
    expect(hasEncodedSlash(normalizePath(raw))).toBe(expected);
  });
});
