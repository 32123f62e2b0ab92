/**
 * request_mirror (config: proto/src/plugins/request-mirror.ts). Its request hook samples the request and, for a
 * sampled one, puts a MirrorCopy on the exchange; the proxy (proxy/mirror.ts) sends the copy once the primary's
 * plan (path, query, headers) is known and the copied body is whole. The body streams to the primary through a
 * tee that copies each chunk as it passes: the copy never holds the primary back (it is buffered, not written to
 * a socket), and it is given up past MIRROR_BODY_BYTES or the process's budget. Not copied: gRPC calls (a stream
 * of messages, often long-lived, and a second server answering the same call is not a shadow but a side effect),
 * and WebSocket handshakes, which the proxy's upgrade path joins to the target without ever sending a copy.
 */
import { Transform, type Readable } from 'node:stream';
import type { IncomingMessage } from 'node:http';
import type { CompiledRequestMirror } from '#proto/plugins/index';
import type { PluginRuntime } from './runtime.js';
import { isGrpcCall } from './grpc-web.js';
import { requestHasBody } from './request-framing.js';

/** The largest request body a mirror request carries; a larger one is not mirrored (`body_too_large`). */
export const MIRROR_BODY_BYTES = 1024 ** 2;

/** Why a copy is not sent: its body too large, the budget spent, or the client's body cut short. */
export type CopyFailure = 'body_too_large' | 'overloaded' | 'aborted';

/**
 * One request's copy for its mirror: the body chunks (when it has one) as the tee saw them. `ready` is called
 * once: with null when the body is whole (or there is none), or with why the copy is given up.
 */
export class MirrorCopy {
  chunks: Buffer[] = [];
  bytes = 0;
  /** null while the body streams, then the copy's end. */
  private outcome: CopyFailure | 'complete' | null;
  private ready: ((failure: CopyFailure | null) => void) | null = null;
  /** Set by the proxy at admission: reserves n bytes of the process's budget, false when spent (none before). */
  take: (n: number) => boolean = () => false;

  constructor(
    readonly origin: string,
    req: IncomingMessage,
  ) {
    const length = req.headers['content-length'];
    this.outcome = !requestHasBody(req) ? 'complete' : length !== undefined && Number(length) > MIRROR_BODY_BYTES ? 'body_too_large' : null;
  }

  /** `ready` runs once the copy's fate is known (at once when it already is). */
  whenReady(ready: (failure: CopyFailure | null) => void): void {
    if (this.outcome === null) this.ready = ready;
    else ready(this.outcome === 'complete' ? null : this.outcome);
  }

  /** Given up (not admitted, or the exchange ended first): nothing more is copied. */
  abandon(): void {
    this.settle('aborted');
  }

  private settle(outcome: CopyFailure | 'complete'): void {
    if (this.outcome !== null) return;
    this.outcome = outcome;
    if (outcome !== 'complete') this.chunks = [];
    const ready = this.ready;
    this.ready = null;
    ready?.(outcome === 'complete' ? null : outcome);
  }

  private see(chunk: Buffer): void {
    if (this.outcome !== null) return;
    if (this.bytes + chunk.length > MIRROR_BODY_BYTES) this.settle('body_too_large');
    else if (!this.take(chunk.length)) this.settle('overloaded');
    else {
      this.bytes += chunk.length;
      this.chunks.push(chunk);
    }
  }

  /** `body` passed through unchanged, each chunk copied; the copy ends with it (cut short: 'aborted'). */
  tee(body: Readable): Readable {
    const copy = this;
    const tee = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        copy.see(chunk);
        callback(null, chunk);
      },
      flush(callback) {
        copy.settle('complete');
        callback();
      },
    });
    tee.once('close', () => copy.settle('aborted'));
    body.once('error', (err) => tee.destroy(err));
    body.pipe(tee);
    return tee;
  }
}

export const requestMirrorRuntime: PluginRuntime<CompiledRequestMirror> = {
  stage: ({ origin, percentage }) => ({
    request(ex) {
      if (percentage < 100 && Math.random() * 100 >= percentage) return;
      const req = ex.req;
      if (isGrpcCall(req)) return;
      const copy = (ex.mirror = new MirrorCopy(origin, req));
      if (requestHasBody(req)) ex.wrapBody((body) => copy.tee(body));
    },
  }),
};
