/**
 * The access log: one line per request on the proxy listener, written when its response has
 * finished or the client has gone (`aborted: true`). Per logged request it costs one object,
 * filled in as the request goes and handed to the logger as it is; an unsampled request costs
 * one random number and nothing else.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { pino } from 'pino';
import type { Logger } from '#proto/logger';
import { clientIpOf } from './headers.js';

/** ACCESS_LOG (on/off) and ACCESS_LOG_SAMPLE (the share of requests logged, 0 to 1). */
export interface AccessLogConfig {
  enabled: boolean;
  sample: number;
}

/** nginx's convention for "the client closed the connection before a status was sent". */
export const CLIENT_CLOSED_REQUEST = 499;

/**
 * One line of the access log (`msg: "access"`, pino's `time` = when the response finished).
 * `durationMs` and `bytes` hold the start time and the socket's byte count at the start until
 * `finish` turns them into the differences: the same object carries them, nothing else is kept.
 */
export interface AccessRecord {
  requestId: string;
  method: string | undefined;
  /** The client's path as sent, without the query (a query can carry credentials). */
  path: string;
  host: string | undefined;
  /** CompiledRoute id (`api:<name>`, `oauth:<server>:<endpoint>`), as in the metrics; null when nothing matched. */
  route: string | null;
  /** Origin of the target the request went to (the last one, after retries); null when none was picked. */
  upstream: string | null;
  status: number;
  /** Bytes written to the client's connection for this response, headers included. */
  bytes: number;
  durationMs: number;
  clientIp: string | undefined;
  aborted?: true;
}

export interface AccessLog {
  /** The record for a request, or null when it is not sampled. */
  start(req: IncomingMessage, requestId: string): AccessRecord | null;
  /**
   * Completes the record from `res` and writes the line (call on the response's 'close'). `socket`
   * is the request's socket as taken at arrival: by 'close', `req.socket` may be null (a refused
   * upload is detached from it so that the connection can carry the error response).
   */
  finish(record: AccessRecord, socket: Socket, res: ServerResponse): void;
}

/** The path of a request line without its query: what logs show (a query can carry credentials). */
export function pathOf(url: string | undefined): string {
  if (!url) return '';
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

/** Bytes of access lines gathered before one write; under PIPE_BUF (4096), so a write to a pipe stays whole. */
const BATCH_BYTES = 4000;
/** How long a quiet period may hold the last access lines back. */
const FLUSH_MS = 100;

/**
 * The logger access lines go through. The bench measured the access log at 31.7 µs of DP CPU per
 * request when its lines went through the service logger like any other: pino's redaction paths
 * walked every record (logger.info of an access record: 7-19 µs with them, 4-9 µs without, in a
 * loaded micro-benchmark; an access record holds no secret by construction: path without query, no
 * headers), and its stdout destination wrote each line on its own (one write syscall per request).
 * So when the logger writes JSON to stdout (the default), access lines get a destination of their
 * own on the same fd, batched: strace -c under load then counts about one write per 6-12 requests
 * (one per ~4 KB, or per 100 ms when quiet; flushed at exit like pino's own); same level and base
 * fields. Otherwise (pretty output, a test's stream) a child without redaction on the logger's stream.
 */
function accessLogger(logger: Logger): Logger {
  const stream = (logger as unknown as Record<symbol, { fd?: unknown } | undefined>)[pino.symbols.streamSym];
  if (stream?.fd !== 1) return logger.child({}, { redact: [] });
  const destination = pino.destination({ dest: 1, minLength: BATCH_BYTES, maxWrite: 4096, periodicFlush: FLUSH_MS });
  return pino({ level: logger.level, base: logger.bindings() }, destination);
}

/** null when ACCESS_LOG=off, the sample is 0 or LOG_LEVEL is above info: the proxy then does no access-log work at all. */
export function createAccessLog(config: AccessLogConfig, baseLogger: Logger): AccessLog | null {
  if (!config.enabled || config.sample <= 0 || !baseLogger.isLevelEnabled('info')) return null;
  const { sample } = config;
  const logger = accessLogger(baseLogger);
  return {
    start(req, requestId) {
      if (sample < 1 && Math.random() >= sample) return null;
      return {
        requestId,
        method: req.method,
        path: pathOf(req.url),
        host: req.headers.host,
        route: null,
        upstream: null,
        status: 0,
        bytes: req.socket.bytesWritten,
        durationMs: performance.now(),
        clientIp: clientIpOf(req.socket.remoteAddress),
      };
    },
    finish(record, socket, res) {
      record.durationMs = Math.round((performance.now() - record.durationMs) * 1000) / 1000;
      record.bytes = socket.bytesWritten - record.bytes;
      if (res.writableFinished) {
        record.status = res.statusCode;
      } else {
        record.status = res.headersSent ? res.statusCode : CLIENT_CLOSED_REQUEST;
        record.aborted = true;
      }
      logger.info(record, 'access');
    },
  };
}
