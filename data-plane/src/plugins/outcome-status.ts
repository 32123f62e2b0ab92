/** What a retry or cb predicate sees as `statusCode`: the upstream's status, 0 when the attempt got no response. */
import type { UpstreamOutcome } from './pipeline.js';

export function outcomeStatus(outcome: UpstreamOutcome): number {
  return outcome.kind === 'response' ? outcome.status : 0;
}
