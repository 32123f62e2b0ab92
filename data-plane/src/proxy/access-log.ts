/**
 * The access log: one line per request on the proxy listener, written when its response has
 * finished or the client has gone (`aborted: true`). Per logged request it costs one object,
 * filled in as the request goes and handed to the logger as it is; an unsampled request costs
 * one random number and nothing else.
 */
import type { IncomingMessage } from 'node:http';
import { writeSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { pino } from 'pino';
import type { Logger } from '#proto/logger';
import { clientAddress, NO_TRUSTED_PROXIES, type TrustedProxies } from '../plugins/client-ip.js';

/** ACCESS_LOG (on/off) and ACCESS_LOG_SAMPLE (the share of requests logged, 0 to 1). */
export interface AccessLogConfig {
  enabled: boolean;
  sample: number;
}

/** nginx's convention for "the client closed the connection before a status was sent". */
export const CLIENT_CLOSED_REQUEST = 499;

/**
 * One line of the access log (`msg: "access"`, pino's `time` = when the response finished).
 * `durationMs` and `bytes` hold the start time and the byte count at the start until
 * `finish` turns them into the differences: the same object carries them, nothing else is kept.
 */
export interface AccessRecord {
  requestId: string;
  method: string | undefined;
  /** The client's path as sent, without the query (a query can carry credentials). */
  path: string;
  /** `HTTP/1.1`, `HTTP/2` (or `HTTP/1.0`), as the client spoke. */
  protocol: string;
  host: string | undefined;
  /** CompiledRoute id (`api:<name>`, `oauth:<server>:<endpoint>`), as in the metrics; null when nothing matched. */
  route: string | null;
  /** Origin of the target the request went to (the last one, after retries); null when none was picked. */
  upstream: string | null;
  status: number;
  /** Bytes written to the client's connection for this response, headers included; for HTTP/2, the response body's. */
  bytes: number;
  durationMs: number;
  clientIp: string | undefined;
  /** Who basic_auth or key_auth let in (the upstream's X-Consumer-Username); absent when nobody authenticated so. */
  consumer?: string;
  /** A gRPC call's status (grpc-status of the trailers or of a Trailers-Only head, or the gateway's own); absent for other requests. */
  grpcStatus?: number;
  aborted?: true;
}

export interface AccessLog {
  /** The record for a request, or null when it is not sampled. */
  /** `sent` counts the bytes written for the answer: the client's connection, or an h2 response (http2.ts). */
  start(req: IncomingMessage, requestId: string, sent: ByteCounter): AccessRecord | null;
  /**
   * Completes the record and writes the line (call on the response's or the WebSocket's 'close'): `status`
   * as answered (CLIENT_CLOSED_REQUEST when the client left before any answer), `aborted` when the answer
   * was cut short. `sent` is start's (by 'close', `req.socket` may be null: a refused upload is detached
   * from it so that the connection can carry the error response).
   */
  finish(record: AccessRecord, sent: ByteCounter, status: number, aborted: boolean): void;
}

/** A connection, or an h2 response, which counts only its own bytes (its connection's are shared by its streams). */
export interface ByteCounter {
  readonly bytesWritten: number;
}

/** The path of a request line without its query: what logs show (a query can carry credentials). */
export function pathOf(url: string | undefined): string {
  if (!url) return '';
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

/**
 * One write per batch of access lines, at most PIPE_BUF (4096) bytes, so that a write to a pipe stays
 * whole between other writers of the same fd (the service logger, other workers).
 */
const BATCH_BYTES = 4096;
/** How long a quiet period may hold the last access lines back. */
const FLUSH_MS = 100;

/** What JSON.stringify escapes in a string: `"`, `\\`, control characters and (lone) surrogates. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what must be escaped.
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/** A string as JSON.stringify writes it: between quotes as it is when nothing in it needs escaping, the usual case. */
function quoted(value: string): string {
  return NEEDS_ESCAPE.test(value) ? JSON.stringify(value) : `"${value}"`;
}

/**
 * The last value of a field and its JSON, for the fields that repeat from one request to the next (route,
 * upstream, host, method, client address): a repeated value costs a string comparison.
 */
class Quoted {
  private value: string | null = null;
  private json = 'null';

  of(value: string | null): string {
    if (value !== this.value) {
      this.value = value;
      this.json = value === null ? 'null' : quoted(value);
    }
    return this.json;
  }
}

const method = new Quoted();
const host = new Quoted();
const route = new Quoted();
const upstream = new Quoted();
const clientIp = new Quoted();

/**
 * An access record as pino writes it with `logger.info(record, 'access')` from a logger with `base`
 * bindings and the default level and time formats: level, time, the bindings, the record's fields
 * in order (undefined ones left out), msg. The fixed shape spares pino's generic walk of the record;
 * access-log.test.ts compares the two over generated records.
 */
export function accessLine(record: AccessRecord, time: number, bindings: string): string {
  return (
    `{"level":30,"time":${time}${bindings},"requestId":${quoted(record.requestId)}` +
    (record.method === undefined ? '' : `,"method":${method.of(record.method)}`) +
    `,"path":${quoted(record.path)},"protocol":"${record.protocol}"` +
    (record.host === undefined ? '' : `,"host":${host.of(record.host)}`) +
    `,"route":${route.of(record.route)},"upstream":${upstream.of(record.upstream)},"status":${record.status},"bytes":${record.bytes},"durationMs":${record.durationMs}` +
    (record.clientIp === undefined ? '' : `,"clientIp":${clientIp.of(record.clientIp)}`) +
    (record.consumer === undefined ? '' : `,"consumer":${quoted(record.consumer)}`) +
    (record.grpcStatus === undefined ? '' : `,"grpcStatus":${record.grpcStatus}`) +
    (record.aborted ? ',"aborted":true' : '') +
    ',"msg":"access"}\n'
  );
}

/**
 * Access lines gathered in one reused buffer and written with one synchronous write per 4 KB (or per
 * 100 ms when quiet; at exit), as pino's default stdout destination writes synchronously. Not pino's
 * batching destination (sonic-boom, asynchronous writes on libuv's pool): it concatenates the lines into
 * strings it measures with Buffer.byteLength on every write, and the lines waiting for the pool's write
 * outlive two scavenges (docs/benchmarks.md has the figures).
 */
export class AccessLineWriter {
  private readonly buffer = Buffer.allocUnsafe(BATCH_BYTES);
  private length = 0;
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly fd: number) {}

  write(line: string): void {
    // A UTF-16 code unit is at most 3 bytes of UTF-8: a line that surely fits is not measured first.
    if (this.length + line.length * 3 > BATCH_BYTES) {
      const bytes = Buffer.byteLength(line);
      if (this.length + bytes > BATCH_BYTES) this.flush();
      if (bytes > BATCH_BYTES) {
        writeAll(this.fd, Buffer.from(line));
        return;
      }
    }
    this.length += this.buffer.write(line, this.length);
    if (this.timer === null) {
      this.timer = setTimeout(() => this.flush(), FLUSH_MS);
      this.timer.unref();
    }
  }

  flush(): void {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.length === 0) return;
    const length = this.length;
    this.length = 0;
    writeAll(this.fd, this.buffer.subarray(0, length));
  }
}

const sleepCell = new Int32Array(new SharedArrayBuffer(4));

/** A full non-blocking pipe (EAGAIN) is waited out 1 ms at a time, as sonic-boom's synchronous mode does. */
function writeAll(fd: number, data: Buffer): void {
  let offset = 0;
  while (offset < data.length) {
    try {
      offset += writeSync(fd, data, offset, data.length - offset);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
      Atomics.wait(sleepCell, 0, 0, 1);
    }
  }
}

/** How records are written: the batched writer on stdout (the default), else a pino child on the logger's own stream. */
type WriteRecord = (record: AccessRecord) => void;

/**
 * Not through the service logger like any other line: pino's redaction paths would walk every record, and an
 * access record holds no secret by construction (path without query, no headers). So when the logger writes JSON to stdout
 * (the default), access lines go to an AccessLineWriter on the same fd, with the logger's level and
 * bindings. Otherwise (pretty output, a test's stream) a child without redaction on the logger's stream.
 */
function recordWriter(logger: Logger): WriteRecord {
  const stream = (logger as unknown as Record<symbol, { fd?: unknown } | undefined>)[pino.symbols.streamSym];
  if (stream?.fd !== 1) {
    const child = logger.child({}, { redact: [] });
    return (record) => child.info(record, 'access');
  }
  const writer = new AccessLineWriter(1);
  process.once('exit', () => writer.flush());
  const bound = JSON.stringify(logger.bindings()).slice(1, -1);
  const bindings = bound === '' ? '' : `,${bound}`;
  return (record) => writer.write(accessLine(record, Date.now(), bindings));
}

/** nginx's $server_protocol, but `HTTP/2` as RFC 9113 names it; a constant for the usual two. */
function protocolOf(req: IncomingMessage): string {
  if (req.httpVersionMajor === 2) return 'HTTP/2';
  return req.httpVersion === '1.1' ? 'HTTP/1.1' : `HTTP/${req.httpVersion}`;
}

/** null when ACCESS_LOG=off, the sample is 0 or LOG_LEVEL is above info: the proxy then does no access-log work at all. */
/** `trusted`: TRUSTED_PROXIES, whose X-Forwarded-For names the client (plugins/client-ip.ts). */
export function createAccessLog(config: AccessLogConfig, baseLogger: Logger, trusted: TrustedProxies = NO_TRUSTED_PROXIES): AccessLog | null {
  if (!config.enabled || config.sample <= 0 || !baseLogger.isLevelEnabled('info')) return null;
  const { sample } = config;
  const write = recordWriter(baseLogger);
  return {
    start(req, requestId, sent) {
      if (sample < 1 && Math.random() >= sample) return null;
      return {
        requestId,
        method: req.method,
        path: pathOf(req.url),
        protocol: protocolOf(req),
        host: req.headers.host,
        route: null,
        upstream: null,
        status: 0,
        bytes: sent.bytesWritten,
        durationMs: performance.now(),
        clientIp: req.socket.remoteAddress === undefined ? undefined : clientAddress(req, trusted),
        consumer: undefined, // set by the proxy once a plugin authenticated someone; one shape for every record
        grpcStatus: undefined,
      };
    },
    finish(record, sent, status, aborted) {
      record.durationMs = Math.round((performance.now() - record.durationMs) * 1000) / 1000;
      record.bytes = sent.bytesWritten - record.bytes;
      record.status = status;
      if (aborted) record.aborted = true;
      write(record);
    },
  };
}
