/**
 * The h2 listener's own limits (http2.ts), with short values over real TLS connections: an idle connection is
 * closed with GOAWAY, an upload that never ends is cancelled, and the HTTP/1.1 fallback has http.Server's
 * settings (Host required, the keep-alive timeout).
 */
import { readFile } from 'node:fs/promises';
import { connect, constants, type ClientHttp2Session } from 'node:http2';
import { connect as connectTls } from 'node:tls';
import type { AddressInfo } from 'node:net';
import { createTestCertificates, type CertificateFiles } from '../../../test/helpers/test-certificates.js';
import { ProxyResponse } from './forward.js';
import { createHttp2Listener, type Http2Listener } from './http2.js';

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
  const make = (idleTimeoutMs: number) => createHttp2Listener(
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
    await expect(text({ ':path': '/a', ':authority': '' })).rejects.toMatchObject({ code: 'ERR_HTTP2_STREAM_ERROR', message: expect.stringContaining('NGHTTP2_PROTOCOL_ERROR') });
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
