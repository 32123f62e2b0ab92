import { compilePredicate, DEFAULT_PREDICATE, predicateProblem } from './status-predicate.js';

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
  ['os.exit(1)', 'is not a valid predicate: expected statusCode, request.Method, a number or a string, found "os.exit" at position 1'],
  ['statusCode >= 500 ||', 'is not a valid predicate: expected statusCode, request.Method, a number or a string at the end'],
  ['(statusCode >= 500', 'is not a valid predicate: expected ")" at the end'],
  ['statusCode >= 500 statusCode', 'is not a valid predicate: expected "||", "&&" or the end, found "statusCode" at position 19'],
  ['1 == 1', 'is not a valid predicate: comparison at position 3 does not use statusCode'],
  ['statusCode == "GET"', 'is not a valid predicate: comparison at position 12 must compare statusCode with a number or request.Method with a string (== or !=)'],
  ['request.Method > "GET"', 'is not a valid predicate: comparison at position 16 must compare statusCode with a number or request.Method with a string (== or !=)'],
  ['statusCode >= 500 ; rm', 'is not a valid predicate: unexpected ";" at position 19'],
])('%j is refused: %s', (source, message) => {
  expect(predicateProblem(source)).toBe(message);
});
