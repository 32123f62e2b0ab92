/**
 * compression (config: proto/src/plugins/compression.ts). A response is compressed with br or gzip
 * (accept-encoding.ts picks) when all hold: the request is not HEAD; the status is not 1xx, 204, 206
 * or 304; the upstream set no Content-Encoding (other than identity) and no Content-Range; its
 * Cache-Control has no `no-transform`; its Content-Type is listed; its Content-Length, when known,
 * is at least `min_size`. Such a response always gets `Vary: Accept-Encoding` (a cache must not
 * hand the compressed body to a client that did not ask for it, nor the reverse), compressed or not.
 *
 * Compressed: Content-Length and Accept-Ranges are dropped (the body is chunked), a strong ETag
 * becomes weak (the bytes differ from the identity representation's), and the body streams through
 * node:zlib. Compression buffers internally, so what the compressor holds is flushed once the
 * upstream pauses (no further chunk queued in the same turn of the event loop): a streamed
 * response (server-sent events, long polling) reaches the client as it is produced, while a large
 * body sent in a burst still compresses in large blocks. Backpressure and aborts are forward.ts's:
 * the compressor is a stage of its stream pipeline, destroyed with it.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { Transform } from 'node:stream';
import { constants, createBrotliCompress, createGzip, type BrotliCompress, type Gzip } from 'node:zlib';
import { mediaTypeListed, type CompiledCompression, type CompressionEncoding } from '#proto/plugins/index';
import { negotiateEncoding } from './accept-encoding.js';
import type { PluginRuntime } from './runtime.js';

/** Brotli's default quality (11) is meant for static assets; 4 compresses better than gzip -6 at a similar speed. */
const BROTLI_QUALITY = 4;
const GZIP_LEVEL = 6;

/** A header value as one string (a list joined with ", "), undefined when absent. */
export function headerText(value: OutgoingHttpHeaders[string]): string | undefined {
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value.join(', ') : String(value);
}

/** True when the response may be compressed at all (whatever the client accepts). */
export function eligible(config: CompiledCompression, method: string | undefined, status: number, headers: OutgoingHttpHeaders): boolean {
  if (method === 'HEAD' || status < 200 || status === 204 || status === 206 || status === 304) return false;
  const encoding = headerText(headers['content-encoding']);
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') return false;
  if (headers['content-range'] !== undefined) return false;
  if (/(?:^|,)\s*no-transform\s*(?:,|$)/i.test(headerText(headers['cache-control']) ?? '')) return false;
  const type = headerText(headers['content-type']);
  if (type === undefined || !mediaTypeListed(config, type)) return false;
  const length = headerText(headers['content-length']);
  return length === undefined || Number(length) >= config.minSize;
}

function addVary(headers: OutgoingHttpHeaders): void {
  const vary = headerText(headers.vary);
  if (vary === undefined || vary.trim() === '') {
    headers.vary = 'Accept-Encoding';
    return;
  }
  const names = vary.split(',').map((v) => v.trim().toLowerCase());
  if (!names.includes('accept-encoding') && !names.includes('*')) headers.vary = `${vary}, Accept-Encoding`;
}

/**
 * A compressor that flushes what it holds whenever its input pauses: the first chunk of a burst
 * schedules one flush after the current I/O callbacks (setImmediate), so chunks that arrive
 * together are compressed together and a lone chunk is not held back.
 */
export function flushingCompressor(encoding: CompressionEncoding, sizeHint: number | undefined): Transform {
  const stream: Gzip | BrotliCompress =
    encoding === 'br'
      ? createBrotliCompress({
          params: {
            [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY,
            [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
            ...(sizeHint !== undefined ? { [constants.BROTLI_PARAM_SIZE_HINT]: sizeHint } : {}),
          },
        })
      : createGzip({ level: GZIP_LEVEL });
  const flushKind = encoding === 'br' ? constants.BROTLI_OPERATION_FLUSH : constants.Z_SYNC_FLUSH;
  let scheduled = false;
  const flush = (): void => {
    scheduled = false;
    if (!stream.destroyed && !stream.writableEnded) stream.flush(flushKind);
  };
  const transform = stream._transform;
  stream._transform = function (chunk: Buffer, bufferEncoding, callback) {
    // flush() itself writes an empty chunk through here: only data schedules a flush.
    if (!scheduled && chunk.length > 0) {
      scheduled = true;
      setImmediate(flush);
    }
    transform.call(this, chunk, bufferEncoding, callback);
  };
  return stream;
}

export const compressionRuntime: PluginRuntime<CompiledCompression> = {
  stage: (config) => ({
    response(ex, status, headers) {
      if (!eligible(config, ex.req.method, status, headers)) return;
      addVary(headers);
      const encoding = negotiateEncoding(ex.req.headers['accept-encoding'], config);
      if (encoding === null) return;
      const length = headerText(headers['content-length']);
      headers['content-encoding'] = encoding;
      delete headers['content-length'];
      delete headers['accept-ranges'];
      const etag = headerText(headers.etag);
      if (etag?.startsWith('"')) headers.etag = `W/${etag}`;
      return flushingCompressor(encoding, length === undefined ? undefined : Number(length));
    },
  }),
};
