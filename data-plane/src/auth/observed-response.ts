/**
 * The response side of an observed OAuth endpoint, as one stream stage for the proxy's pipeline.
 * It passes every byte through unchanged but holds back the latest chunk until the observer's
 * finish() has updated the token store: a client can never read a complete token response (and use
 * the token, possibly on another DP) before the store knows the token, or before a refresh or
 * revoke has removed the old one. finish() never throws and the stores bound their calls
 * (Redis: 1 s command timeout, no offline queue), so the hold-back is bounded too.
 */
import { Transform } from 'node:stream';
import type { EndpointObserver } from './index.js';

export function observedResponse(observer: EndpointObserver): Transform {
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
      const release = () => callback(null, held ?? undefined);
      observer.finish().then(release, release);
    },
  });
}
