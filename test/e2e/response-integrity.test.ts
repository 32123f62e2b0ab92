/**
 * A response cut by its upstream (docs/proxy.md "Proxy behaviour", Security / reliability): a real upstream declares a body
 * (Content-Length, or chunked), sends half of it and destroys its socket. Every client must see the truncation: an
 * HTTP/2 client (node:http2, h2c) gets its stream reset with INTERNAL_ERROR and the upstream's Content-Length, never
 * a clean end (the access log marks the request aborted); an HTTP/1.1 client gets its connection cut before the
 * response is complete.
 */
import { get as httpGet, type IncomingMessage } from 'node:http';
import { constants, type IncomingHttpHeaders } from 'node:http2';
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import { h2Session } from '../helpers/h2-client.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

const DECLARED = 200_000;
const SENT = 100_000;

let gw: Gateway;
let upstream: Upstream;

beforeAll(async () => {
  upstream = await startUpstream('cut');
  upstream.setBehaviour((req) => ({ kind: 'cut', declared: DECLARED, sent: SENT, chunked: req.url.includes('chunked') }));
  gw = await startGateway();
  await createApis(gw, [apiDefinition({ name: 'cut', listenPath: '/cut/*', targets: [upstream.url] })]);
}, 90_000);

afterAll(async () => {
  const problems = await gw?.stop();
  await upstream?.close();
  expect(problems).toBe('');
});

interface H2Outcome {
  headers: IncomingHttpHeaders;
  received: number;
  ended: boolean;
  error: NodeJS.ErrnoException | null;
  rstCode: number;
}

/** One h2c GET, followed to the stream's close: whether it ended cleanly, the error it raised, its reset code. */
async function h2Get(path: string, requestId: string): Promise<H2Outcome> {
  const s = await h2Session(`http://127.0.0.1:${gw.dp.proxyPort}`);
  try {
    return await new Promise<H2Outcome>((resolve) => {
      const stream = s.request({ ':path': path, ':method': 'GET', 'x-request-id': requestId });
      const outcome: H2Outcome = { headers: {}, received: 0, ended: false, error: null, rstCode: -1 };
      stream.on('response', (h) => (outcome.headers = h));
      stream.on('data', (chunk: Buffer) => (outcome.received += chunk.length));
      stream.on('end', () => (outcome.ended = true));
      stream.on('error', (err: NodeJS.ErrnoException) => (outcome.error = err));
      stream.on('close', () => resolve({ ...outcome, rstCode: stream.rstCode ?? -1 }));
    });
  } finally {
    s.close();
  }
}

test.each([
  ['Content-Length', '/cut/length'],
  ['chunked', '/cut/chunked'],
])('an HTTP/2 client sees an upstream response (%s) cut mid-body as a reset stream, not a complete body', async (_framing, path) => {
  const logged = () => gw.dp.process.lines().filter((l) => l.json?.msg === 'response stream failed').length;
  const before = logged();
  const requestId = `cut-h2-${path.slice(5)}-${Date.now()}`;
  const got = await h2Get(path, requestId);
  expect(got.headers[':status']).toBe(200);
  expect(got.received).toBeGreaterThan(0);
  expect(got.received).toBeLessThan(DECLARED);
  expect(got.rstCode).toBe(constants.NGHTTP2_INTERNAL_ERROR);
  expect(got.error?.code).toBe('ERR_HTTP2_STREAM_ERROR');
  expect(got.ended).toBe(false);
  // The upstream's declared length reaches the client: a client that reads it also sees the body fall short.
  if (path.endsWith('length')) expect(got.headers['content-length']).toBe(String(DECLARED));
  else expect(got.headers['content-length']).toBeUndefined();
  // The gateway's log names the cut response.
  await pollUntil(async () => logged() > before || undefined, { what: "the cut response's log line", timeoutMs: 5_000 });
  const access = await pollUntil(async () => gw.dp.process.lines().find((l) => l.json?.msg === 'access' && l.json?.requestId === requestId), {
    what: `the access line of ${requestId}`,
    timeoutMs: 5_000,
  });
  expect(access.json).toMatchObject({ protocol: 'HTTP/2', status: 200, aborted: true });
});

test.each([
  ['Content-Length', '/cut/length'],
  ['chunked', '/cut/chunked'],
])('an HTTP/1.1 client sees an upstream response (%s) cut mid-body as an aborted connection', async (_framing, path) => {
  const got = await new Promise<{ res: IncomingMessage; received: number; complete: boolean; aborted: boolean }>((resolve, reject) => {
    const req = httpGet({ host: '127.0.0.1', port: gw.dp.proxyPort, path, agent: false }, (res) => {
      let received = 0;
      res.on('data', (chunk: Buffer) => (received += chunk.length));
      res.on('error', () => undefined); // "aborted": read below from res.complete
      res.on('close', () => resolve({ res, received, complete: res.complete, aborted: res.errored !== null }));
    });
    req.on('error', reject);
  });
  expect(got.res.statusCode).toBe(200);
  expect(got.received).toBeLessThan(DECLARED);
  expect(got.complete).toBe(false);
  expect(got.aborted).toBe(true);
  if (path.endsWith('length')) expect(got.res.headers['content-length']).toBe(String(DECLARED));
});
