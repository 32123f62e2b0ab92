/**
 * Properties of the path normaliser, the listen-path router and the docs/proxy.md "Proxy behaviour" rewrite,
 * over seeded generated paths built from the characters that cause trouble: `/`, `.`, `%`, the
 * encodings of dot and slash, and letters. The table tests pin the rows; these check the rules hold
 * between the rows too.
 */
import fc from 'fast-check';
import { compileApi } from '../compile/index.js';
import type { ApiDefinition } from '../definition/types.js';
import { buildRoutingTable, joinPaths, normalizePath, rewrite } from './index.js';

const PARAMS = { seed: 20261123, numRuns: 2_000 };

/** Path pieces that interact: dot segments, their encodings, empty segments, escapes. */
const piece = fc.constantFrom(
  '/',
  '//',
  '.',
  '..',
  '/./',
  '/../',
  '%2e',
  '%2E',
  '%2e%2e',
  '.%2e',
  '%2f',
  '%2F',
  '%25',
  '%',
  '%%32%65',
  '%7e',
  'a',
  'b',
  'api',
  '~',
  ';',
  '%41',
);
const rawPath = fc.array(piece, { maxLength: 14 }).map((parts) => parts.join(''));

/** Each segment as an upstream that percent-decodes it once would see it. */
function decodedSegments(path: string): string[] {
  return path.split('/').map((seg) => {
    try {
      return decodeURIComponent(seg);
    } catch {
      return seg;
    }
  });
}

describe('normalizePath', () => {
  test('is idempotent', () => {
    fc.assert(
      fc.property(rawPath, (p) => normalizePath(normalizePath(p)) === normalizePath(p)),
      PARAMS,
    );
  });

  test('starts with one /, has no empty inner segment, and no segment is or decodes to . or ..', () => {
    fc.assert(
      fc.property(rawPath, (p) => {
        const n = normalizePath(p);
        expect(n.startsWith('/')).toBe(true);
        expect(n.includes('//')).toBe(false);
        for (const seg of decodedSegments(n)) expect(['.', '..']).not.toContain(seg);
      }),
      PARAMS,
    );
  });
});

function api(listenPath: string, target: string, strip: boolean, append: boolean): ApiDefinition {
  return {
    name: 'p',
    active: true,
    hosts: [],
    proxy: {
      listen_path: listenPath,
      upstreams: { balancing: 'roundrobin', targets: [{ target }] },
      methods: ['ALL'],
      strip_path: strip,
      append_path: append,
      preserve_host: false,
      insecure_skip_verify: false,
      forwarding_timeouts: { dial_timeout: '30s', response_header_timeout: '60s' },
    },
    plugins: [],
  };
}

const targetPath = fc.constantFrom('', '/', '/base', '/base/', '/v1/inner');
const prefix = fc.constantFrom('/svc', '/a/b', '/api');
const query = fc.constantFrom('', 'x=1', 'a=%2e%2e&b=/../');

const cases = fc.record({ prefix, targetPath, strip: fc.boolean(), append: fc.boolean(), tail: rawPath, query });

/** One API `<prefix>/*` → `http://up.example<targetPath>`; the request `<prefix>/<tail>?<query>` matched and rewritten as the proxy does. */
function forward(c: typeof cases extends fc.Arbitrary<infer C> ? C : never) {
  const route = compileApi(api(`${c.prefix}/*`, `http://up.example${c.targetPath}`, c.strip, c.append));
  const path = normalizePath(`${c.prefix}/${c.tail}`);
  const match = buildRoutingTable([route]).match({ method: 'GET', host: undefined, path });
  if (!match) return null;
  return { path, match, out: rewrite(match, route.targets[0], { path, query: c.query, host: undefined }) };
}

describe('rewrite of a matched request (SPEC §4 rules 9–12)', () => {
  test('no path that reaches an upstream holds a dot segment, however the client spelled it', () => {
    fc.assert(
      fc.property(cases, (c) => {
        const forwarded = forward(c);
        if (!forwarded) return; // the tail climbed out of the prefix: another route's business, never this one's
        const upstreamPath = forwarded.out.path.split('?')[0];
        for (const seg of decodedSegments(upstreamPath)) expect(['.', '..']).not.toContain(seg);
        expect(upstreamPath.startsWith('/')).toBe(true);
      }),
      PARAMS,
    );
  });

  test('strip: T joined to R minus L; append: T joined to R; neither: T unless T is empty or /; the query rides along', () => {
    fc.assert(
      fc.property(cases, (c) => {
        const forwarded = forward(c);
        if (!forwarded) return;
        const { path, match, out } = forwarded;
        const [upstreamPath, upstreamQuery = ''] = out.path.split(/\?(.*)/s);
        expect(path.startsWith(match.matched)).toBe(true);
        if (c.strip) expect(upstreamPath).toBe(joinPaths(c.targetPath, path.slice(match.matched.length)));
        else if (c.append) expect(upstreamPath).toBe(joinPaths(c.targetPath, path));
        else expect(upstreamPath).toBe(c.targetPath === '' || c.targetPath === '/' ? path : c.targetPath);
        expect(upstreamQuery).toBe(c.query);
        expect(out.origin).toBe('http://up.example');
      }),
      PARAMS,
    );
  });

  test('joinPaths puts exactly one / at the seam', () => {
    const part = fc.constantFrom('', '/', 'a', '/a', 'a/', '/a/', '/a/b');
    fc.assert(
      fc.property(part, part, (a, b) => {
        const joined = joinPaths(a, b);
        expect(joined.length).toBeGreaterThan(0);
        const seam = a.replace(/\/$/, '').length;
        if (a.replace(/\/$/, '') !== '' && b.replace(/^\//, '') !== '') expect(joined.slice(seam, seam + 2)).toMatch(/^\/[^/]/);
      }),
      PARAMS,
    );
  });
});
