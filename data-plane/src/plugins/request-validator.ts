/**
 * request_validator (config: proto/src/plugins/request-validator.ts). Unlike every other plugin it buffers the
 * request body: a JSON document can only be judged whole.
 *
 * | request                                              | answer                                                  |
 * |------------------------------------------------------|---------------------------------------------------------|
 * | gRPC or gRPC-Web (Content-Type), WebSocket handshake | passed, not validated                                   |
 * | no body (or an empty chunked one)                    | passed; 400 "request body required" with body_required  |
 * | Content-Type not in allowed_content_types (or none)  | 415 UNSUPPORTED_MEDIA_TYPE                              |
 * | Content-Length, or the bytes read, over max_body_bytes | 413 REQUEST_BODY_TOO_LARGE (body_limit's), connection closed |
 * | not UTF-8 JSON                                       | 400 REQUEST_INVALID "request body is not valid JSON"    |
 * | against the schema                                   | 400 "request body invalid: <instance path> <message>"   |
 * | valid                                                | forwarded: the same bytes, with their Content-Length    |
 *
 * The 400's text is the first ajv error's JSON pointer and message, which name the schema's constraint
 * ("must be >= 1", "must have required property 'id'"), never a value the client sent; the pointer (keys the client
 * chose among them) is cut at 200 characters.
 */
import type { Readable } from 'node:stream';
import { GatehouseError, isGatehouseError } from '#proto/errors';
import { mediaTypeListed, type CompiledRequestValidator } from '#proto/plugins/index';
import { tooLarge } from './body-limit.js';
import { isGrpcCall } from './grpc-web.js';
import type { PluginExchange } from './pipeline.js';
import { requestHasBody } from './request-framing.js';
import type { PluginRuntime } from './runtime.js';

const MAX_POINTER = 200;
const utf8 = new TextDecoder('utf-8', { fatal: true });

const invalid = (message: string) => new GatehouseError('REQUEST_INVALID', message);

/**
 * The whole of `body`, or a rejection with `fail()` once more than `limit` bytes came (the rest is left unread), with
 * body_limit's error when its counter is in front, or as incomplete when the client left mid-body.
 */
function readAll(body: Readable, limit: number, fail: () => GatehouseError): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let seen = 0;
    const stop = (err: Error) => {
      body.off('data', onData).off('end', onEnd).off('error', stop).off('close', onClose);
      body.pause();
      reject(isGatehouseError(err) ? err : invalid('request body incomplete'));
    };
    const onClose = () => stop(invalid('request body incomplete'));
    const onData = (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > limit) stop(fail());
      else chunks.push(chunk);
    };
    const onEnd = () => {
      body.off('close', onClose);
      resolve(Buffer.concat(chunks, seen));
    };
    body.on('data', onData).once('end', onEnd).once('error', stop).once('close', onClose);
  });
}

/** The first schema violation as the client is told it, or null when `bytes` hold a valid document. */
function violation(c: CompiledRequestValidator, bytes: Buffer): string | null {
  let document: unknown;
  try {
    document = JSON.parse(utf8.decode(bytes));
  } catch {
    return 'request body is not valid JSON';
  }
  try {
    if (c.validate(document)) return null;
  } catch {
    // a recursive schema ($ref to itself) walks the document's depth: a stack overflow is the body's fault
    return 'request body is nested too deeply';
  }
  const first = c.validate.errors![0]!;
  const pointer = first.instancePath.length > MAX_POINTER ? `${first.instancePath.slice(0, MAX_POINTER)}…` : first.instancePath;
  return `request body invalid: ${pointer === '' ? '' : `${pointer} `}${first.message ?? 'is not valid'}`;
}

/** The client's raw header list with one Content-Length, the buffered body's (a chunked one had none). */
function withLength(raw: readonly string[], length: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() !== 'content-length') out.push(raw[i]!, raw[i + 1]!);
  out.push('content-length', String(length));
  return out;
}

export const requestValidatorRuntime: PluginRuntime<CompiledRequestValidator> = {
  stage: (c) => ({
    request(ex: PluginExchange) {
      const req = ex.req;
      if (isGrpcCall(req) || req.headers.upgrade !== undefined) return;
      if (!requestHasBody(req)) {
        if (c.bodyRequired) throw invalid('request body required');
        return;
      }
      const type = req.headers['content-type'];
      if (type === undefined || !mediaTypeListed(c.contentTypes, type)) {
        throw new GatehouseError('UNSUPPORTED_MEDIA_TYPE', 'request content type not allowed by request_validator');
      }
      const length = req.headers['content-length'];
      // node:http has checked the framing: the body is exactly this long.
      if (length !== undefined && Number(length) > c.maxBytes) throw tooLarge(ex, c.maxBytes);
      return readAll(ex.requestBody(req), c.maxBytes, () => tooLarge(ex, c.maxBytes)).then((bytes) => {
        if (bytes.length === 0) {
          if (c.bodyRequired) throw invalid('request body required');
        } else {
          const problem = violation(c, bytes);
          if (problem !== null) throw invalid(problem);
        }
        ex.headers = withLength(ex.headers, bytes.length);
        ex.replaceBody(bytes);
      });
    },
  }),
};
