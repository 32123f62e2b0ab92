/**
 * The h2 listener's own limits (http2.ts), with short values over real TLS connections: an idle connection is
 * closed with GOAWAY, an upload that never ends is cancelled, and the HTTP/1.1 fallback has http.Server's
 * settings (Host required, the keep-alive timeout). Then h2c on a plain-text node:http listener (acceptH2c):
 * the first bytes of a connection pick the protocol, and none of them is lost to either.
 */
import { readFile } from 'node:fs/promises';
import { Agent, createServer as createHttpServer, request as httpRequest, type IncomingMessage, type Server as HttpServer } from 'node:http';
import { connect, constants, type ClientHttp2Session } from 'node:http2';
import { connect as connectTls } from 'node:tls';
import { connect as connectTcp, type AddressInfo, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import { createTestCertificates, type CertificateFiles } from '../../../test/helpers/test-certificates.js';
import { trickle } from '../../../test/helpers/trickle.js';
import { ProxyResponse } from './forward.js';
import { acceptH2c, createHttp2Listener, type Http2Connections, type Http2Listener } from './http2.js';

let certs: CertificateFiles;
let ca: Buffer;
let listener: Http2Listener;
let port: number;
/** The same, but closing idle connections after 300 ms: only the idle test uses it (a slow machine may pause that long between two requests of the others). */
let idleListener: Http2Listener;
let idlePort: number;
/** Requests the handler saw: url, and whether the body ended. */
const seen: { url: string; rawHeaders: string[]; bodyEnded: Promise<boolean> }[] = [];

beforeAll(async () => {
  certs = await createTestCertificates();
  ca = await readFile(certs.caCert);
  const [cert, key] = await Promise.all([readFile(certs.serverCert), readFile(certs.serverKey)]);
  const make = (idleTimeoutMs: number) =>
    createHttp2Listener(
      { cert, key },
      { headersTimeout: 30_000, requestTimeout: 300_000, maxHeaderSize: 16 * 1024, ServerResponse: ProxyResponse },
      (req, res) => {
        const bodyEnded = new Promise<boolean>((resolve) => {
          req.once('end', () => resolve(true));
          req.once('close', () => resolve(req.readableEnded));
        });
        seen.push({ url: req.url ?? '', rawHeaders: req.rawHeaders, bodyEnded });
        req.resume();
        if (req.url !== '/upload') res.end(`ok ${req.headers.host}`);
      },
      (_req, res) => {
        res.writeHead(400);
        res.end('refused');
      },
      { maxConcurrentStreams: 8, idleTimeoutMs, requestTimeoutMs: 400 },
    );
  const start = async (l: Http2Listener) => {
    await new Promise<void>((resolve) => l.server.listen(0, '127.0.0.1', resolve));
    return (l.server.address() as AddressInfo).port;
  };
  [listener, idleListener] = [make(60_000), make(300)];
  [port, idlePort] = await Promise.all([start(listener), start(idleListener)]);
});

afterAll(async () => {
  for (const l of [listener, idleListener]) {
    l?.cut();
    await new Promise((resolve) => l?.server.close(resolve));
  }
  await certs?.dispose();
});

function session(on = port): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const s = connect(`https://localhost:${on}`, { ca });
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

test('the connection announces its stream limit, and a connection idle past idleTimeoutMs gets GOAWAY and closes', async () => {
  const s = await session(idlePort);
  const goaway = new Promise<number>((resolve) => s.once('goaway', resolve));
  const closed = new Promise<void>((resolve) => s.once('close', resolve));
  const stream = s.request({ ':path': '/first' });
  stream.resume();
  await new Promise((resolve) => stream.once('end', resolve));
  expect(s.remoteSettings.maxConcurrentStreams).toBe(8);
  expect(await goaway).toBe(constants.NGHTTP2_NO_ERROR);
  await closed;
});

test('an upload that has not ended requestTimeoutMs after the request started is cancelled', async () => {
  const s = await session();
  try {
    const stream = s.request({ ':path': '/upload', ':method': 'POST' }, { endStream: false });
    const reset = new Promise<number>((resolve) => stream.once('close', () => resolve(stream.rstCode ?? -1)));
    stream.on('error', () => {});
    stream.write('never ends');
    expect(await reset).toBe(constants.NGHTTP2_CANCEL);
    expect(await seen.find((r) => r.url === '/upload')!.bodyEnded).toBe(false);
  } finally {
    s.destroy();
  }
});

test('an h2 request gets Host from :authority; one whose Host names another host goes to the refusal', async () => {
  const s = await session();
  try {
    const text = (headers: Record<string, string>) =>
      new Promise<string>((resolve, reject) => {
        const stream = s.request(headers);
        let body = '';
        stream.setEncoding('utf8');
        stream.on('data', (chunk: string) => (body += chunk));
        stream.on('end', () => resolve(body));
        stream.on('error', reject);
      });
    expect(await text({ ':path': '/a', ':authority': 'gw.test' })).toBe('ok gw.test');
    expect(await text({ ':path': '/a', ':authority': 'gw.test', host: 'gw.test' })).toBe('ok gw.test');
    expect(await text({ ':path': '/a', ':authority': 'gw.test', host: 'GW.test' })).toBe('ok GW.test');
    expect(await text({ ':path': '/a', ':authority': 'gw.test', host: 'other.test' })).toBe('refused');
    // An empty one never reaches the proxy: nghttp2 resets the stream.
    await expect(text({ ':path': '/a', ':authority': '' })).rejects.toMatchObject({
      code: 'ERR_HTTP2_STREAM_ERROR',
      message: expect.stringContaining('NGHTTP2_PROTOCOL_ERROR'),
    });
  } finally {
    s.destroy();
  }
});

test("the HTTP/1.1 fallback has http.Server's settings (keep-alive timeout, header limits, Host required): a request without Host is 400", async () => {
  const settings = listener.server as unknown as Record<string, unknown>;
  expect(settings).toMatchObject({ keepAliveTimeout: 5_000, requireHostHeader: true, maxHeaderSize: 16 * 1024, headersTimeout: 30_000 });
  const answer = await new Promise<string>((resolve, reject) => {
    const socket = connectTls({ host: '127.0.0.1', port, servername: 'localhost', ca, ALPNProtocols: ['http/1.1'] }, () => {
      socket.write('GET /no-host HTTP/1.1\r\n\r\n');
    });
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
  });
  expect(answer).toMatch(/^HTTP\/1\.1 400 /);
});

test('a request reaches the handler without pseudo-headers, with one Cookie and Host from :authority', async () => {
  const s = await session();
  try {
    const stream = s.request({ ':path': '/fields', ':authority': 'gw.test', cookie: ['a=1', 'b=2'], 'x-a': '1' });
    stream.resume();
    await new Promise((resolve) => stream.once('end', resolve));
    const fields = seen.find((r) => r.url === '/fields')!.rawHeaders;
    expect(fields.filter((_, i) => i % 2 === 0 && fields[i]!.startsWith(':'))).toEqual([]);
    expect(fields).toEqual(expect.arrayContaining(['x-a', '1']));
    const cookies = fields.flatMap((name, i) => (i % 2 === 0 && name === 'cookie' ? [fields[i + 1]] : []));
    expect(cookies).toEqual(['a=1; b=2']);
    expect(fields.slice(-2)).toEqual(['host', 'gw.test']);
  } finally {
    s.destroy();
  }
});

describe('h2c beside HTTP/1.1 on a plain-text listener', () => {
  const handle = (req: IncomingMessage, res: ProxyResponse) => {
    let length = 0;
    req.on('data', (chunk: Buffer) => (length += chunk.length));
    req.on('end', () => res.end(`${req.httpVersion} ${req.method} ${req.url} ${length} ${req.headers.host}`));
  };
  // A short header timeout: a connection that never finishes its first bytes is closed after it.
  const HEADERS_TIMEOUT = 400;
  const started: { http: HttpServer<typeof IncomingMessage, typeof ProxyResponse>; h2c: Http2Connections }[] = [];

  async function plainListener(): Promise<{ port: number; h2c: Http2Connections }> {
    const options = { headersTimeout: HEADERS_TIMEOUT, requestTimeout: 300_000, maxHeaderSize: 16 * 1024, ServerResponse: ProxyResponse };
    const http = createHttpServer(options, handle);
    const h2c = acceptH2c(http, options, handle, (_req, res) => res.writeHead(400).end('refused'));
    started.push({ http, h2c });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    return { port: (http.address() as AddressInfo).port, h2c };
  }

  let plainPort: number;
  beforeAll(async () => {
    plainPort = (await plainListener()).port;
  });

  afterAll(async () => {
    for (const { http, h2c } of started) {
      h2c.cut();
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
    }
  });

  function h2cSession(connection?: () => Duplex, on = plainPort): Promise<ClientHttp2Session> {
    return new Promise((resolve, reject) => {
      const s = connect(`http://127.0.0.1:${on}`, connection ? { createConnection: connection } : {});
      s.once('connect', () => resolve(s));
      s.once('error', reject);
    });
  }

  function text(s: ClientHttp2Session, headers: Record<string, string>, body?: string[]): Promise<string> {
    return new Promise((resolve, reject) => {
      const stream = s.request(headers, { endStream: body === undefined });
      let answer = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => (answer += chunk));
      stream.on('end', () => resolve(answer));
      stream.on('error', reject);
      if (body) {
        for (const chunk of body) stream.write(chunk);
        stream.end();
      }
    });
  }

  /** What a raw connection gets back for `parts`, written apart (each its own TCP segment), until the server ends it. */
  function raw(parts: string[], end = false): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = connectTcp(plainPort, '127.0.0.1', async () => {
        socket.setNoDelay(true);
        for (const part of parts) {
          socket.write(part);
          await delay(20);
        }
        if (end) socket.end();
      });
      let answer = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (answer += chunk));
      socket.on('close', () => resolve(answer));
      socket.on('error', reject);
    });
  }

  test('a connection that opens with the HTTP/2 preface is served h2: GET, and a POST streamed in DATA frames', async () => {
    const s = await h2cSession();
    try {
      expect(await text(s, { ':path': '/h2c?x=1' })).toBe('2.0 GET /h2c?x=1 0 127.0.0.1:' + plainPort);
      expect(await text(s, { ':path': '/upload', ':method': 'POST' }, ['a', 'b'.repeat(70_000), 'c'])).toBe(`2.0 POST /upload 70002 127.0.0.1:${plainPort}`);
      expect(s.remoteSettings.maxConcurrentStreams).toBe(128);
    } finally {
      s.close();
    }
  });

  test('the preface split into single-byte TCP segments is still h2', async () => {
    const s = await h2cSession(() => trickle(plainPort, 24));
    try {
      expect(await text(s, { ':path': '/trickled' })).toBe(`2.0 GET /trickled 0 127.0.0.1:${plainPort}`);
    } finally {
      s.close();
    }
  });

  test('HTTP/1.1 is served as before: keep-alive, and a request whose first segment is a prefix of the preface', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const sockets = new Set<Socket>();
      for (const path of ['/one', '/two']) {
        const answer = await new Promise<string>((resolve, reject) => {
          const req = httpRequest({ host: '127.0.0.1', port: plainPort, path, method: 'POST', agent }, (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => (body += chunk));
            res.on('end', () => resolve(body));
          });
          req.on('socket', (socket) => sockets.add(socket));
          req.on('error', reject);
          req.end('hello');
        });
        expect(answer).toBe(`1.1 POST ${path} 5 127.0.0.1:${plainPort}`);
      }
      expect(sockets.size).toBe(1);
    } finally {
      agent.destroy();
    }
    // "P", then "R": as far as the preface goes; the third byte tells.
    const split = await raw(['P', 'R', 'OPFIND /split HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi']);
    expect(split).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\n1\.1 PROPFIND \/split 2 gw\.test$/);
  });

  test('a connection that sends part of the preface and goes silent is closed after the header timeout; one that ends there, at once', async () => {
    let started = Date.now();
    expect(await raw(['PRI * HTTP/2.0\r\n'])).toBe('');
    expect(Date.now() - started).toBeGreaterThanOrEqual(HEADERS_TIMEOUT - 50);
    started = Date.now();
    expect(await raw(['PRI * HTTP/2.0\r\n'], true)).toBe('');
    expect(Date.now() - started).toBeLessThan(HEADERS_TIMEOUT - 50);
  });

  test('drain sends GOAWAY to an h2c connection, and closes one not yet told apart', async () => {
    const own = await plainListener();
    const s = await h2cSession(undefined, own.port);
    const quiet = connectTcp(own.port, '127.0.0.1');
    await new Promise((resolve) => quiet.once('connect', resolve));
    quiet.write('PRI *');
    await delay(50);
    const quietClosed = new Promise((resolve) => quiet.once('close', resolve));
    try {
      expect(await text(s, { ':path': '/before' })).toContain('GET /before');
      const goaway = new Promise<number>((resolve) => s.once('goaway', resolve));
      own.h2c.drain();
      expect(await goaway).toBe(constants.NGHTTP2_NO_ERROR);
      await quietClosed;
    } finally {
      s.destroy();
      quiet.destroy();
    }
  });
});
