/**
 * node:http2 as a test client of the proxy listener (h2 over TLS, h2c in plain text): a connected session,
 * and one request on it with its whole answer.
 */
import { connect, constants, type ClientHttp2Session, type IncomingHttpHeaders, type SecureClientSessionOptions } from 'node:http2';
import type { DataPlane } from './start-data-plane.js';
import type { Upstream } from './upstream-server.js';

/** A session once connected (`origin`: `https://…` for h2 by ALPN, `http://…` for h2c with prior knowledge). */
export function h2Session(origin: string, options: SecureClientSessionOptions = {}): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const s = connect(origin, options);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

export interface H2Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** One request on `s`; `body` is written in the given chunks (no Content-Length unless the headers give one). */
export function h2Request(s: ClientHttp2Session, headers: Record<string, string | string[]>, body?: readonly string[]): Promise<H2Answer> {
  return new Promise((resolve, reject) => {
    const stream = s.request(headers, { endStream: body === undefined });
    const chunks: Buffer[] = [];
    let answer: IncomingHttpHeaders = {};
    stream.on('response', (h) => (answer = h));
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => resolve({ status: Number(answer[':status']), headers: answer, body: Buffer.concat(chunks) }));
    stream.on('error', reject);
    if (body) {
      for (const chunk of body) stream.write(chunk);
      stream.end();
    }
  });
}

/**
 * SIGTERM to `dp` while `s` has a GET of `path` in flight (to `upstream`, which answers slowly): the client gets
 * GOAWAY(NO_ERROR), the stream in flight still gets its whole answer, and the process exits 0.
 */
export async function expectGoawayOnStop(dp: DataPlane, s: ClientHttp2Session, upstream: Upstream, path: string): Promise<void> {
  const goaway = new Promise<number>((resolve) => s.once('goaway', (code) => resolve(code)));
  const before = upstream.requests.length;
  const inFlight = h2Request(s, { ':path': path, ':method': 'GET' });
  await upstream.waitForRequests(before + 1);
  const exited = dp.stop();
  expect(await goaway).toBe(constants.NGHTTP2_NO_ERROR);
  const answer = await inFlight;
  expect(answer.status).toBe(200);
  expect((JSON.parse(answer.body.toString()) as { url: string }).url).toBe(path);
  expect((await exited).code).toBe(0);
}
