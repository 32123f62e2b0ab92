import type { IncomingHttpHeaders } from 'node:http';
import { clientIpOf, clientResponseHeaders, requestIdOf, upstreamRequestHeaders, withoutConnectionNamed } from './headers.js';

const GATEWAY_TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const facts = {
  host: 'upstream:9000',
  forwardedFor: '10.0.0.1',
  forwardedHost: 'gw.test',
  proto: 'http',
  requestId: 'rid',
  traceparent: GATEWAY_TRACEPARENT,
  keepTracestate: true,
  consumer: null,
  consumerGroups: null,
  clientCert: null,
  sessionCookies: null,
} as const;

/** Pairs of the flat undici list, names lower-cased. */
function pairs(flat: string[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let i = 0; i < flat.length; i += 2) out.push([flat[i]!.toLowerCase(), flat[i + 1]!]);
  return out;
}

describe('upstreamRequestHeaders', () => {
  test('names that are Object.prototype keys are ordinary end-to-end headers (the lower-casing table has no prototype)', () => {
    const raw = ['Constructor', 'a', '__proto__', 'b', 'toString', 'c'];
    expect(pairs(upstreamRequestHeaders(raw, facts)).slice(0, 3)).toEqual([
      ['constructor', 'a'],
      ['__proto__', 'b'],
      ['tostring', 'c'],
    ]);
  });
  test.each([
    ['Connection itself', ['Connection', 'keep-alive'], 'connection'],
    ['Keep-Alive', ['Keep-Alive', 'timeout=5'], 'keep-alive'],
    ['Proxy-Authorization', ['Proxy-Authorization', 'Basic x'], 'proxy-authorization'],
    ['TE', ['TE', 'trailers'], 'te'],
    ['Trailer', ['Trailer', 'X-T'], 'trailer'],
    ['Transfer-Encoding', ['Transfer-Encoding', 'chunked'], 'transfer-encoding'],
    ['Upgrade', ['Upgrade', 'websocket'], 'upgrade'],
    ['Expect (answered by the gateway itself)', ['Expect', '100-continue'], 'expect'],
  ])('drops %s', (_name, raw, dropped) => {
    const names = pairs(upstreamRequestHeaders(raw, facts)).map(([n]) => n);
    expect(names).not.toContain(dropped);
  });

  test('keeps end-to-end headers, duplicates and order; Authorization unchanged', () => {
    const raw = ['Accept', 'a/b', 'Authorization', 'Bearer t', 'X-Dup', '1', 'X-Dup', '2'];
    expect(pairs(upstreamRequestHeaders(raw, facts)).slice(0, 4)).toEqual([
      ['accept', 'a/b'],
      ['authorization', 'Bearer t'],
      ['x-dup', '1'],
      ['x-dup', '2'],
    ]);
  });

  test.each([
    ['fresh trail', []],
    ['what the client sent is replaced', ['X-Forwarded-For', '1.1.1.1', 'X-Forwarded-Proto', 'https', 'X-Forwarded-Host', 'edge']],
    ['repeated lines too', ['X-Forwarded-For', '1.1.1.1', 'x-forwarded-for', '2.2.2.2', 'X-FORWARDED-HOST', 'a', 'X-Forwarded-Host', 'b']],
  ] as const)("X-Forwarded-* are the gateway's, once each: %s", (_name, raw) => {
    const got = pairs(upstreamRequestHeaders(raw, facts)).filter(([n]) => n.startsWith('x-forwarded-'));
    expect(got).toEqual([
      ['x-forwarded-for', '10.0.0.1'],
      ['x-forwarded-proto', 'http'],
      ['x-forwarded-host', 'gw.test'],
    ]);
  });

  test('the session cookies are taken out of every Cookie line; a line left empty goes; other cookies stay', () => {
    const raw = ['Cookie', 'a=1; gh_oidc=sealed; b=2', 'Cookie', 'gh_oidc_flow=x', 'Accept', '*/*'];
    const got = pairs(upstreamRequestHeaders(raw, { ...facts, sessionCookies: new Set(['gh_oidc', 'gh_oidc_flow']) })).filter(([n]) => n === 'cookie');
    expect(got).toEqual([['cookie', 'a=1; b=2']]);
  });

  test("X-Consumer-Username is the gateway's: a client's copies (any case) never go upstream; the consumer key_auth found does, once", () => {
    const raw = ['X-Consumer-Username', 'admin', 'Accept', '*/*', 'x-consumer-username', 'root'];
    expect(pairs(upstreamRequestHeaders(raw, facts)).filter(([n]) => n === 'x-consumer-username')).toEqual([]);
    expect(pairs(upstreamRequestHeaders(raw, { ...facts, consumer: 'ann' })).filter(([n]) => n === 'x-consumer-username')).toEqual([
      ['x-consumer-username', 'ann'],
    ]);
  });

  test("X-Consumer-Groups is the gateway's (acl's): a client's copies never go upstream; the consumer's groups acl sends do, once", () => {
    const raw = ['X-Consumer-Groups', 'admins', 'Accept', '*/*', 'x-consumer-groups', 'root'];
    expect(pairs(upstreamRequestHeaders(raw, facts)).filter(([n]) => n === 'x-consumer-groups')).toEqual([]);
    expect(pairs(upstreamRequestHeaders(raw, { ...facts, consumerGroups: 'a, b' })).filter(([n]) => n === 'x-consumer-groups')).toEqual([
      ['x-consumer-groups', 'a, b'],
    ]);
  });

  test("Host and X-Request-Id are the gateway's, once each", () => {
    const raw = ['Host', 'evil', 'X-Request-Id', 'client', 'host', 'evil2'];
    const list = pairs(upstreamRequestHeaders(raw, facts));
    expect(list.filter(([n]) => n === 'host')).toEqual([['host', 'upstream:9000']]);
    expect(list.filter(([n]) => n === 'x-request-id')).toEqual([['x-request-id', 'rid']]);
  });
});

describe('upstreamRequestHeaders: W3C trace context', () => {
  const clientTraceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01';
  test.each([
    ["the client sent none: the gateway's is added", [], true, [GATEWAY_TRACEPARENT], []],
    [
      "the client's is replaced by the gateway's, tracestate kept",
      ['traceparent', clientTraceparent, 'tracestate', 'v=1'],
      true,
      [GATEWAY_TRACEPARENT],
      ['v=1'],
    ],
    ['an invalid traceparent is replaced and its tracestate dropped', ['Traceparent', 'garbage', 'TraceState', 'v=1'], false, [GATEWAY_TRACEPARENT], []],
  ])('%s', (_name, raw, keepTracestate, traceparents, tracestates) => {
    const list = pairs(upstreamRequestHeaders(raw, { ...facts, keepTracestate }));
    expect(list.filter(([n]) => n === 'traceparent').map(([, v]) => v)).toEqual(traceparents);
    expect(list.filter(([n]) => n === 'tracestate').map(([, v]) => v)).toEqual(tracestates);
  });
});

describe('clientResponseHeaders', () => {
  test('drops hop-by-hop and Connection-named headers, keeps the rest, sets X-Request-Id', () => {
    const out = clientResponseHeaders(
      {
        connection: 'close, x-internal',
        'x-internal': '1',
        'keep-alive': 'timeout=9',
        'transfer-encoding': 'chunked',
        'proxy-authenticate': 'Basic',
        'set-cookie': ['a=1', 'b=2'],
        'x-request-id': 'upstream-made-this-up',
        'content-type': 'text/plain',
      },
      'rid',
    );
    expect(out).toEqual({ 'set-cookie': ['a=1', 'b=2'], 'content-type': 'text/plain', 'x-request-id': 'rid' });
  });
  test.each<[string, string | string[], string[]]>([
    ['keep-alive (the usual value) names nothing more', 'keep-alive', ['close', 'x-internal', 'content-type']],
    ['Keep-Alive likewise', 'Keep-Alive', ['close', 'x-internal', 'content-type']],
    ['close names a header called close', 'close', ['x-internal', 'content-type']],
    ['keep-alive with a named header', 'keep-alive, X-Internal', ['close', 'content-type']],
    ['KEEP-ALIVE with padding', ' KEEP-ALIVE ', ['close', 'x-internal', 'content-type']],
    ['repeated Connection lines', ['keep-alive', 'x-internal'], ['close', 'content-type']],
  ])('Connection: %s', (_name, connection, kept) => {
    // undici gives an array for repeated lines, which Node's IncomingHttpHeaders type does not foresee.
    const upstream = { connection, 'keep-alive': 'timeout=5', close: 'odd but end-to-end', 'x-internal': '1', 'content-type': 'text/plain' };
    const out = clientResponseHeaders(upstream as IncomingHttpHeaders, 'rid');
    expect(Object.keys(out)).toEqual([...kept, 'x-request-id']);
  });
});

describe('requestIdOf', () => {
  test.each([
    ['a sane id is kept', 'abc-123', 'abc-123'],
    ['200 visible characters are kept', 'x'.repeat(200), 'x'.repeat(200)],
    ['201 characters are replaced', 'x'.repeat(201), null],
    ['a space is replaced', 'a b', null],
    ['a non-ASCII id is replaced', 'idé', null],
    ['empty is replaced', '', null],
    ['absent is generated', undefined, null],
  ])('%s', (_name, header, kept) => {
    const id = requestIdOf(header);
    if (kept !== null) expect(id).toBe(kept);
    else expect(id).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('withoutConnectionNamed', () => {
  test("drops the client's headers its Connection names, any case, before plugins add theirs", () => {
    const raw = ['Connection', 'close, X-Private, authorization', 'X-Private', 'secret', 'Authorization', 'Bearer c', 'Accept', '*/*'];
    expect(withoutConnectionNamed(raw)).toEqual(['Connection', 'close, X-Private, authorization', 'Accept', '*/*']);
  });
  test('the same list when Connection names only hop-by-hop fields, or is absent', () => {
    const plain = ['Connection', 'keep-alive, Upgrade', 'Upgrade', 'websocket', 'Accept', '*/*'];
    expect(withoutConnectionNamed(plain)).toBe(plain);
    const none = ['Accept', '*/*'];
    expect(withoutConnectionNamed(none)).toBe(none);
  });
});

describe('clientIpOf', () => {
  test.each([
    ['IPv4-mapped IPv6 is shown as IPv4', '::ffff:127.0.0.1', '127.0.0.1'],
    ['plain IPv6 stays', '::1', '::1'],
    ['plain IPv4 stays', '10.1.2.3', '10.1.2.3'],
    ['unknown', undefined, undefined],
  ])('%s', (_name, input, expected) => {
    expect(clientIpOf(input)).toBe(expected);
  });
});

describe("undici's table of well-known header names", () => {
  test("holds the names the gateway sets on every upstream request, so undici's request checks take them as they are", async () => {
    const { GATEWAY_SET_HEADERS } = await import('#proto/plugins/http-syntax');
    const { default: constants } = (await import('undici/lib/core/constants.js')) as { default: { headerNameLowerCasedRecord: Record<string, string> } };
    for (const name of GATEWAY_SET_HEADERS) expect(constants.headerNameLowerCasedRecord[name]).toBe(name);
  });
  test('takes lower-case token names only', async () => {
    const { addWellKnownHeaderNames } = await import('./undici.js');
    const { default: constants } = (await import('undici/lib/core/constants.js')) as { default: { headerNameLowerCasedRecord: Record<string, string> } };
    addWellKnownHeaderNames(['X-Mixed-Case', 'bad name', 'x-fine']);
    expect(constants.headerNameLowerCasedRecord['X-Mixed-Case']).toBeUndefined();
    expect(constants.headerNameLowerCasedRecord['bad name']).toBeUndefined();
    expect(constants.headerNameLowerCasedRecord['x-fine']).toBe('x-fine');
  });
  test('a well-known name still has its value checked: a line break in it is refused before anything is sent', async () => {
    const { createServer } = await import('node:http');
    const { Pool } = await import('./undici.js');
    let requests = 0;
    const server = createServer((_req, res) => {
      requests++;
      res.end('ok');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const pool = new Pool(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
    try {
      await expect(pool.request({ method: 'GET', path: '/', headers: ['x-request-id', 'a\r\nx-injected: 1'] })).rejects.toThrow(/invalid x-request-id header/);
      const ok = await pool.request({ method: 'GET', path: '/', headers: ['x-request-id', 'fine'] });
      expect(await ok.body.text()).toBe('ok');
      expect(requests).toBe(1);
    } finally {
      await pool.close();
      server.close();
    }
  });
});
