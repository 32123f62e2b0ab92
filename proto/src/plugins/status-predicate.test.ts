import { compilePredicate, DEFAULT_PREDICATE, NO_GRPC_STATUS, predicateProblem } from './status-predicate.js';

test.each([
  [DEFAULT_PREDICATE, 0, 'GET', true],
  [DEFAULT_PREDICATE, 500, 'GET', true],
  [DEFAULT_PREDICATE, 503, 'GET', true],
  [DEFAULT_PREDICATE, 404, 'GET', false],
  [DEFAULT_PREDICATE, 200, 'GET', false],
  ['statusCode == 502 || statusCode == 503', 503, 'GET', true],
  ['statusCode == 502 || statusCode == 503', 500, 'GET', false],
  ['statusCode >= 500 && statusCode != 501', 501, 'GET', false],
  ['statusCode >= 500 && statusCode != 501', 502, 'GET', true],
  ['500 <= statusCode', 500, 'GET', true],
  ['!(statusCode < 500)', 499, 'GET', false],
  ['(statusCode == 0 || statusCode >= 500) && request.Method == "GET"', 500, 'GET', true],
  ['(statusCode == 0 || statusCode >= 500) && request.Method == "GET"', 500, 'PUT', false],
  ['statusCode >= 500 && method != "delete"', 500, 'DELETE', false],
  ['statusCode == 429 || statusCode > 499 && statusCode < 600', 429, 'GET', true],
])('%s with statusCode %d and %s → %s', (source, status, method, expected) => {
  expect(compilePredicate(source)(status, method)).toBe(expected);
});

test.each([
  ['', 'is not a valid predicate: must not be empty'],
  ['statusCode', 'is not a valid predicate: expected a comparison (==, !=, >=, <=, >, <) at the end'],
  ['statusCode === 5', 'is not a valid predicate: unexpected "=" at position 14'],
  ['os.exit(1)', 'is not a valid predicate: expected statusCode, grpcStatus, request.Method, a number or a string, found "os.exit" at position 1'],
  ['statusCode >= 500 ||', 'is not a valid predicate: expected statusCode, grpcStatus, request.Method, a number or a string at the end'],
  ['grpc_status == 14', 'is not a valid predicate: expected statusCode, grpcStatus, request.Method, a number or a string, found "grpc_status" at position 1'],
  [
    'grpcStatus == "UNAVAILABLE"',
    'is not a valid predicate: comparison at position 12 must compare statusCode or grpcStatus with a number or request.Method with a string (== or !=)',
  ],
  ['(statusCode >= 500', 'is not a valid predicate: expected ")" at the end'],
  ['statusCode >= 500 statusCode', 'is not a valid predicate: expected "||", "&&" or the end, found "statusCode" at position 19'],
  ['1 == 1', 'is not a valid predicate: comparison at position 3 does not use statusCode or grpcStatus'],
  [
    'statusCode == "GET"',
    'is not a valid predicate: comparison at position 12 must compare statusCode or grpcStatus with a number or request.Method with a string (== or !=)',
  ],
  [
    'request.Method > "GET"',
    'is not a valid predicate: comparison at position 16 must compare statusCode or grpcStatus with a number or request.Method with a string (== or !=)',
  ],
  ['statusCode >= 500 ; rm', 'is not a valid predicate: unexpected ";" at position 19'],
])('%j is refused: %s', (source, message) => {
  expect(predicateProblem(source)).toBe(message);
});

test.each([
  ['grpcStatus == 14', 200, 14, true],
  ['grpcStatus == 14', 200, 8, false],
  // Not a gRPC call, or no Trailers-Only status: -1, so no comparison with a status code holds.
  ['grpcStatus == 14', 200, NO_GRPC_STATUS, false],
  ['grpcStatus >= 0', 200, NO_GRPC_STATUS, false],
  ['grpcStatus != 0', 200, NO_GRPC_STATUS, true],
  [DEFAULT_PREDICATE, 200, 14, false],
  ['statusCode == 0 || grpcStatus == 14 || grpcStatus == 8', 200, 8, true],
  ['statusCode == 0 || grpcStatus == 14 || grpcStatus == 8', 0, NO_GRPC_STATUS, true],
  ['!(grpcStatus == 14) && statusCode >= 500', 503, 14, false],
  ['grpcStatus == statusCode', 14, 14, true],
])('%s with statusCode %d and grpcStatus %d → %s', (source, status, grpcStatus, expected) => {
  expect(compilePredicate(source)(status, 'POST', grpcStatus)).toBe(expected);
});

test('a predicate called without a gRPC status sees -1', () => {
  expect(compilePredicate('grpcStatus < 0')(200, 'GET')).toBe(true);
});
