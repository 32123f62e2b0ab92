/** What a retry or cb predicate (and a passive health check) sees of an attempt: `statusCode` and `grpcStatus`. */
import type { IncomingMessage } from 'node:http';
import { NO_GRPC_STATUS } from '#proto/plugins/index';
import { isGrpcCall } from './grpc-web.js';
import type { UpstreamOutcome } from './pipeline.js';

/** The upstream's status, 0 when the attempt got no response. */
export function outcomeStatus(outcome: UpstreamOutcome): number {
  return outcome.kind === 'response' ? outcome.status : 0;
}

const GRPC_UNKNOWN = 2;

/**
 * The grpc-status of a gRPC call's Trailers-Only answer (its head); NO_GRPC_STATUS for any other request or
 * answer. Only the head's counts, as with Envoy: a status in the trailers comes after the body started to
 * stream to the client, too late to retry. A value that is no status code is UNKNOWN, as gRPC clients read it.
 */
export function outcomeGrpcStatus(outcome: UpstreamOutcome, req: IncomingMessage): number {
  if (outcome.kind !== 'response' || !isGrpcCall(req)) return NO_GRPC_STATUS;
  const value = outcome.headers['grpc-status'];
  if (value === undefined) return NO_GRPC_STATUS;
  return typeof value === 'string' && /^\d{1,2}$/.test(value) && Number(value) <= 16 ? Number(value) : GRPC_UNKNOWN;
}
