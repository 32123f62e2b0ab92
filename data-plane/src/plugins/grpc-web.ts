/**
 * grpc_web (config: proto/src/plugins/grpc-web.ts): browsers speak gRPC-Web, which cannot use HTTP trailers;
 * the upstream speaks gRPC. Translated as grpc/grpc's PROTOCOL-WEB.md describes and Envoy's grpc_web filter does:
 *
 * | gRPC-Web (client side)                                  | gRPC (upstream side, HTTP/2)                  |
 * |---------------------------------------------------------|-----------------------------------------------|
 * | Content-Type `application/grpc-web[+proto]`             | `application/grpc[+proto]`                    |
 * | `application/grpc-web-text[+proto]`: the body in base64 | the body decoded (Content-Length dropped)     |
 * | trailers as the body's last frame: flag 0x80, length,   | HTTP/2 trailers (grpc-status, grpc-message…)  |
 * |   then `name:value\r\n` lines                           |                                               |
 * | a Trailers-Only answer keeps its status in the headers  | the same                                      |
 *
 * A request of any other Content-Type passes untouched (one route can serve gRPC and gRPC-Web clients), and so
 * does an upstream answer that is not gRPC's (an HTML 503): a gRPC-Web client reads its HTTP status.
 */
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import { Transform, type Readable } from 'node:stream';
import type { PluginRuntime } from './runtime.js';

export interface GrpcWebMode {
  /** `-text`: bodies in base64 both ways. */
  text: boolean;
  /** What follows the type, kept on both sides: `+proto`, `; charset=…`, or ''. */
  rest: string;
}

const GRPC_WEB = /^application\/grpc-web(-text)?(?=$|[+;\s])/i;
const GRPC = /^application\/grpc(?=$|[+;\s])/i;

/** Whether a Content-Type is gRPC's (`application/grpc`, `application/grpc+proto`, with or without parameters); gRPC-Web's is not. */
export function isGrpcType(contentType: string): boolean {
  return GRPC.test(contentType);
}

/** Whether a request is a gRPC call: gRPC's Content-Type, or gRPC-Web's (the grpc_web plugin makes it one upstream). */
export function isGrpcCall(req: IncomingMessage): boolean {
  const type = req.headers['content-type'];
  return type !== undefined && (GRPC.test(type) || GRPC_WEB.test(type));
}

export function grpcWebMode(contentType: string | undefined): GrpcWebMode | null {
  const match = contentType === undefined ? null : GRPC_WEB.exec(contentType);
  return match ? { text: match[1] !== undefined, rest: contentType!.slice(match[0].length) } : null;
}

/** The client's raw header list with gRPC's Content-Type, and without Content-Length when the body is re-encoded. */
function upstreamHeaders(raw: readonly string[], mode: GrpcWebMode): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (name === 'content-type') out.push(raw[i]!, `application/grpc${mode.rest}`);
    else if (!(name === 'content-length' && mode.text)) out.push(raw[i]!, raw[i + 1]!);
  }
  return out;
}

/**
 * base64 to bytes, across chunk boundaries. A client encodes each message apart, so padded segments may follow
 * one another (`YQ==Yg==`): node's decoder stops at the first `=`, so the text is cut after each padding.
 */
export class Base64Decoder extends Transform {
  private pending = '';

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: (err?: Error | null, out?: Buffer) => void): void {
    const text = this.pending + chunk.toString('latin1');
    const usable = text.length - (text.length % 4);
    this.pending = text.slice(usable);
    callback(null, decodeSegments(text.slice(0, usable)));
  }

  override _flush(callback: (err?: Error | null) => void): void {
    callback(this.pending === '' ? null : new Error('grpc-web-text body is not whole base64'));
  }
}

function decodeSegments(text: string): Buffer {
  if (!text.includes('=')) return Buffer.from(text, 'base64');
  const parts: Buffer[] = [];
  let start = 0;
  for (let end = 4; end <= text.length; end += 4) {
    if (text.charCodeAt(end - 1) === 0x3d /* '=' */ || end === text.length) {
      parts.push(Buffer.from(text.slice(start, end), 'base64'));
      start = end;
    }
  }
  return Buffer.concat(parts);
}

/** The trailers as gRPC-Web's last frame. */
export function trailerFrame(trailers: OutgoingHttpHeaders): Buffer {
  let lines = '';
  for (const name in trailers) {
    const value = trailers[name];
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) lines += `${name}:${String(one)}\r\n`;
  }
  const body = Buffer.from(lines, 'latin1');
  const frame = Buffer.allocUnsafe(5 + body.length);
  frame[0] = 0x80;
  frame.writeUInt32BE(body.length, 1);
  body.copy(frame, 5);
  return frame;
}

/** The response body for the client: as it came (base64 in text mode), then the trailers' frame when there are any. */
export class GrpcWebBody extends Transform {
  trailers: OutgoingHttpHeaders | null = null;
  /** Text mode: the bytes short of a 3-byte group, encoded with the next chunk so that no padding falls mid-stream. */
  private carry: Buffer | null = null;

  constructor(private readonly text: boolean) {
    super();
  }

  private encode(bytes: Buffer, last: boolean): Buffer | string {
    if (!this.text) return bytes;
    const all = this.carry ? Buffer.concat([this.carry, bytes]) : bytes;
    const whole = last ? all.length : all.length - (all.length % 3);
    this.carry = whole < all.length ? all.subarray(whole) : null;
    return all.subarray(0, whole).toString('base64');
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: (err?: Error | null, out?: Buffer | string) => void): void {
    callback(null, this.encode(chunk, false));
  }

  override _flush(callback: (err?: Error | null, out?: Buffer | string) => void): void {
    const frame = this.trailers ? trailerFrame(this.trailers) : Buffer.alloc(0);
    callback(null, this.encode(frame, true));
  }
}

export const grpcWebRuntime: PluginRuntime<unknown> = {
  stage: () => ({
    request(ex) {
      const mode = grpcWebMode(ex.req.headers['content-type']);
      if (!mode) return;
      ex.grpcWeb = mode;
      ex.headers = upstreamHeaders(ex.headers, mode);
      if (mode.text)
        ex.wrapBody((body: Readable) => {
          const decoder = new Base64Decoder();
          body.once('error', (err) => decoder.destroy(err));
          return body.pipe(decoder);
        });
    },
    response(ex, _status, headers) {
      const mode = ex.grpcWeb;
      const type = headers['content-type'];
      if (!mode || typeof type !== 'string' || !isGrpcType(type)) return;
      headers['content-type'] = `application/grpc-web${mode.text ? '-text' : ''}${type.slice('application/grpc'.length)}`;
      delete headers['content-length'];
      const body = new GrpcWebBody(mode.text);
      ex.trailersTo = (trailers) => {
        body.trailers = trailers;
      };
      return body;
    },
  }),
};
