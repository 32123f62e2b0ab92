import type { IncomingMessage } from 'node:http';
import { GatehouseError } from '#proto/errors';
import { outcomeGrpcStatus, outcomeStatus } from './outcome-status.js';
import type { UpstreamOutcome } from './pipeline.js';

const request = (contentType?: string) => ({ headers: contentType === undefined ? {} : { 'content-type': contentType } }) as IncomingMessage;
const response = (status: number, headers: Record<string, string>): UpstreamOutcome => ({
  kind: 'response',
  status,
  headers,
  deliver: () => undefined,
  discard: () => undefined,
});
const failure: UpstreamOutcome = { kind: 'error', error: new GatehouseError('UPSTREAM_UNREACHABLE', 'refused') };

test.each([
  ['a Trailers-Only UNAVAILABLE to a gRPC call', 'application/grpc', response(200, { 'grpc-status': '14' }), 14],
  ['its OK', 'application/grpc+proto', response(200, { 'grpc-status': '0' }), 0],
  ['a gRPC-Web call (the upstream answered gRPC)', 'application/grpc-web-text', response(200, { 'grpc-status': '8' }), 8],
  ['a status that is no code: UNKNOWN, as clients read it', 'application/grpc', response(200, { 'grpc-status': 'busy' }), 2],
  ['a code past 16: UNKNOWN', 'application/grpc', response(200, { 'grpc-status': '99' }), 2],
  ['a head without a status (it comes in the trailers, too late)', 'application/grpc', response(200, { 'content-type': 'application/grpc' }), -1],
  ['no response', 'application/grpc', failure, -1],
  ['a request that is no gRPC call', 'application/json', response(200, { 'grpc-status': '14' }), -1],
  ['a request without Content-Type', undefined, response(200, { 'grpc-status': '14' }), -1],
])('grpcStatus of %s', (_what, type, outcome, expected) => {
  expect(outcomeGrpcStatus(outcome, request(type))).toBe(expected);
});

test('statusCode: the response status, 0 without one', () => {
  expect(outcomeStatus(response(503, {}))).toBe(503);
  expect(outcomeStatus(failure)).toBe(0);
});
