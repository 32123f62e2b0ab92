/**
 * body_limit (config: proto/src/plugins/body-limit.ts). A Content-Length over the limit is refused
 * before anything is sent upstream. A chunked body is counted while it streams: past the limit the
 * upstream request is aborted with REQUEST_BODY_TOO_LARGE, which the client gets as a 413 while
 * nothing was written to it yet. The 413 closes the connection: the rest of the body is never read.
 */
import { Transform, type Readable } from 'node:stream';
import { GatehouseError } from '#proto/errors';
import type { CompiledBodyLimit } from '#proto/plugins/index';
import type { PluginExchange } from './pipeline.js';
import type { PluginRuntime } from './runtime.js';
import { requestHasBody } from './request-framing.js';

/** The 413 of a body over `limit` (request_validator's too); the connection closes after it, the rest unread. */
export function tooLarge(ex: PluginExchange, limit: number): GatehouseError {
  ex.addClientHeader('connection', 'close');
  return new GatehouseError('REQUEST_BODY_TOO_LARGE', `request body over the limit of ${limit} bytes`);
}

/** `body` piped through a counter that fails once more than `limit` bytes went through. */
function limitedBody(body: Readable, limit: number, fail: () => GatehouseError): Readable {
  let seen = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      seen += chunk.length;
      if (seen > limit) callback(fail());
      else callback(null, chunk);
    },
  });
  body.once('error', (err) => counter.destroy(err));
  body.pipe(counter);
  return counter;
}

export const bodyLimitRuntime: PluginRuntime<CompiledBodyLimit> = {
  stage: ({ bytes }) => ({
    request(ex) {
      const headers = ex.req.headers;
      const length = headers['content-length'];
      if (length !== undefined) {
        // node:http has checked the framing: the body is exactly this long.
        if (Number(length) > bytes) throw tooLarge(ex, bytes);
        return;
      }
      if (requestHasBody(ex.req)) ex.wrapBody((body) => limitedBody(body, bytes, () => tooLarge(ex, bytes)));
    },
  }),
};
