/**
 * A POST with Transfer-Encoding: chunked through the proxy listener, one chunk per entry, a few ms apart, so the
 * data plane sees them as they stream. Writing stops once the answer came (a 413 before the end); write errors
 * after the answer are expected.
 */
import { request, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';

export interface ChunkedAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

export function postChunked(port: number, path: string, chunks: readonly (string | Buffer)[], headers: OutgoingHttpHeaders = {}): Promise<ChunkedAnswer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: 'POST', agent: false, headers: { ...headers, 'transfer-encoding': 'chunked' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    let answered = false;
    req.on('response', () => (answered = true));
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    let sent = 0;
    const next = (): void => {
      if (answered || req.destroyed) return;
      if (sent === chunks.length) {
        req.end();
        return;
      }
      req.write(chunks[sent++]);
      setTimeout(next, 5);
    };
    next();
  });
}
