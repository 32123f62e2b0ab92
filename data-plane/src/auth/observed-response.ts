/**
 * The response side of an observed OAuth endpoint, as one stream stage for the proxy's pipeline.
 * It passes every byte through unchanged but holds back the latest chunk until the observer's
 * finish() has updated the token store: a client can never read a complete token response (and use
 * the token, possibly on another DP) before the store knows the token, or before a refresh or
 * revoke has removed the old one. Holding back `end` alone would not do: with Content-Length
 * framing the client sees the response complete with its last byte.
 */
import { Transform } from 'node:stream';
import type { EndpointObserver } from './index.js';

/** A token store that hangs must not hang token responses: past this, the response completes anyway. */
const OBSERVER_FINISH_TIMEOUT_MS = 2_000;

export function observedResponse(observer: EndpointObserver, finishTimeoutMs = OBSERVER_FINISH_TIMEOUT_MS): Transform {
  let held: Buffer | null = null;
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      try {
        observer.responseChunk(chunk);
      } catch {
        // bookkeeping only: the client's bytes win
      }
      const previous = held;
      held = chunk;
      if (previous) this.push(previous);
      callback();
    },
    flush(callback) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, finishTimeoutMs);
      });
      const finished = Promise.resolve()
        .then(() => observer.finish())
        .catch(() => undefined);
      void Promise.race([finished, timeout]).then(() => {
        clearTimeout(timer);
        callback(null, held ?? undefined);
      });
    },
  });
}
