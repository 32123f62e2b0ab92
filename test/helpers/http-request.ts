/**
 * One HTTP request with node:http, no connection reuse (no sockets outlive a test), a hard
 * timeout, and every part of the response captured: status, headers, raw body.
 * node:http rather than fetch because tests must set Host and other forbidden headers.
 */
import { createHash } from 'node:crypto';
import { request as httpRequestRaw, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';
import { request as httpsRequestRaw } from 'node:https';

export interface HttpResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  text: string;
  /** Parsed JSON body, or undefined when the body is not JSON. */
  json: unknown;
  sha256: string;
}

export interface HttpRequestOptions {
  method?: string;
  headers?: OutgoingHttpHeaders;
  body?: string | Buffer;
  timeoutMs?: number;
  /** https: URLs: the CA (PEM) the server certificate must chain to. */
  ca?: string | Buffer;
  /** https: URLs: a client certificate and its key (PEM), for a server that asks for one. */
  cert?: string | Buffer;
  key?: string | Buffer;
  /** https: URLs: the TLS versions the client offers (e.g. TLSv1.2 only). */
  maxVersion?: 'TLSv1.2' | 'TLSv1.3';
  /** The client's source address (e.g. 127.0.0.2: another loopback client, as the server sees it). */
  localAddress?: string;
  /** Connect to this Unix socket instead of the URL's host and port (which still name the Host). */
  socketPath?: string;
}

export function httpRequest(url: string, options: HttpRequestOptions = {}): Promise<HttpResponse> {
  const { method = 'GET', headers = {}, body, timeoutMs = 10_000, ca, cert, key, maxVersion, localAddress, socketPath } = options;
  const target = new URL(url);
  const send = target.protocol === 'https:' ? httpsRequestRaw : httpRequestRaw;
  return new Promise((resolve, reject) => {
    const req = send(
      {
        ...(ca === undefined ? {} : { ca }),
        ...(cert === undefined ? {} : { cert, key }),
        ...(maxVersion === undefined ? {} : { maxVersion }),
        ...(localAddress === undefined ? {} : { localAddress }),
        ...(socketPath === undefined ? {} : { socketPath }),
        host: target.hostname,
        port: target.port,
        path: `${target.pathname}${target.search}`,
        method,
        // A Transfer-Encoding given sends the body chunked (without a Content-Length).
        headers: body === undefined || headers['transfer-encoding'] !== undefined ? headers : { 'content-length': Buffer.byteLength(body), ...headers },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          clearTimeout(timer);
          const raw = Buffer.concat(chunks);
          const text = raw.toString('utf8');
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: raw,
            text,
            json,
            sha256: createHash('sha256').update(raw).digest('hex'),
          });
        });
      },
    );
    const timer = setTimeout(() => {
      req.destroy(new Error(`${method} ${url} got no complete response within ${timeoutMs} ms`));
    }, timeoutMs);
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.end(body);
  });
}
