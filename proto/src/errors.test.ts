import { readFileSync } from 'node:fs';
import {
  answerGrpcStatus,
  ERROR_TABLE,
  GRPC_STATUS,
  GatehouseError,
  gatewayBody,
  gatewayBodyOf,
  gatewayGrpcStatus,
  grpcMessage,
  adminBody,
  logLevelOf,
  type ErrorCode,
} from './errors.js';

const codes = Object.keys(ERROR_TABLE) as ErrorCode[];
const errorsDoc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');

describe('error table', () => {
  test.each(codes)('%s is documented in docs/errors.md with its status', (code) => {
    const row = errorsDoc.split('\n').find((line) => line.startsWith(`| \`${code}\` |`));
    expect(row).toBeDefined();
    expect(row).toContain(`| ${ERROR_TABLE[code].status} |`);
  });

  test.each(codes)('%s has its gRPC status in docs/errors.md, by number and name, when the proxy answers it', (code) => {
    const row = errorsDoc.split('\n').find((line) => line.startsWith(`| \`${code}\` |`))!;
    const grpc: number | undefined = (ERROR_TABLE[code] as { grpcStatus?: number }).grpcStatus;
    const name = Object.entries(GRPC_STATUS).find(([, value]) => value === grpc)?.[0];
    expect(row.split(' | ')[2]).toBe(grpc === undefined ? '' : `${grpc} \`${name}\``);
  });

  test('docs/errors.md documents no code that does not exist', () => {
    const documented = [...errorsDoc.matchAll(/^\| `([A-Z_]+)` \| \d{3} \|/gm)].map((m) => m[1]);
    expect(documented.sort()).toEqual([...codes].sort());
  });

  test.each([
    ['NO_ROUTE', 404, '"no API found with those values"'],
    ['AUTH_HEADER_MISSING', 400, '"authorization field missing"'],
    ['BEARER_MALFORMED', 400, '"bearer token malformed"'],
    ['TOKEN_REJECTED', 401, '"access token not authorized"'],
    ['UPSTREAM_UNREACHABLE', 502, '"bad gateway"'],
    ['UPSTREAM_TIMEOUT', 504, '"gateway timeout"'],
    ['NO_SNAPSHOT', 503, '"no configuration loaded"'],
  ] as const)('gateway error %s is %d with body %s', (code, status, body) => {
    expect(new GatehouseError(code, 'x').status).toBe(status);
    expect(gatewayBody(code)).toBe(body);
  });

  test("the proxy sends a detailed code's message (REQUEST_INVALID's) and every other code's fixed body", () => {
    expect(gatewayBodyOf(new GatehouseError('REQUEST_INVALID', 'request body invalid: /a must be string'))).toBe('"request body invalid: /a must be string"');
    expect(gatewayBodyOf(new GatehouseError('REQUEST_BODY_TOO_LARGE', 'request body over the limit of 16 bytes'))).toBe('"request body too large"');
    expect(codes.filter((code) => (ERROR_TABLE[code] as { detailed?: true }).detailed)).toEqual(['REQUEST_INVALID']);
  });

  test('every error with a gateway body has a gRPC status, and only those', () => {
    for (const code of codes) {
      const row = ERROR_TABLE[code];
      expect({ code, grpc: 'grpcStatus' in row }).toEqual({ code, grpc: 'gatewayBody' in row });
    }
  });

  test.each([
    ['NO_ROUTE', '12', 'no API found with those values'],
    ['TOKEN_REJECTED', '16', 'access token not authorized'],
    ['UPSTREAM_TIMEOUT', '4', 'gateway timeout'],
    ['RATE_LIMITED', '8', 'rate limit exceeded'],
    ['VALIDATION_FAILED', '13', 'internal server error'],
  ] as const)('a gRPC client is told %s as grpc-status %s, grpc-message %s', (code, status, message) => {
    expect(gatewayGrpcStatus(code)).toEqual({ 'grpc-status': status, 'grpc-message': message });
  });

  test('grpc-message is percent-encoded as gRPC asks: visible ASCII and space as they are, "%" and the rest as %XX of UTF-8', () => {
    expect(grpcMessage('100% naïve\r\n~')).toBe('100%25 na%C3%AFve%0D%0A~');
  });

  test.each([
    [400, '13'],
    [401, '16'],
    [403, '7'],
    [404, '12'],
    [429, '14'],
    [502, '14'],
    [503, '14'],
    [504, '14'],
    [200, '2'],
    [204, '2'],
    [301, '2'],
    [410, '2'],
    [500, '2'],
  ] as const)("a plugin's %s answer to a gRPC client is grpc-status %s (gRPC's HTTP-to-gRPC mapping)", (status, grpcStatus) => {
    expect(answerGrpcStatus(status, 'down: 100%')).toEqual({ 'grpc-status': grpcStatus, 'grpc-message': 'down: 100%25' });
  });

  test('admin body is {"error": message}', () => {
    expect(JSON.parse(adminBody(new GatehouseError('API_NOT_FOUND', 'api definition not found')))).toEqual({
      error: 'api definition not found',
    });
  });

  test.each(codes)('%s logs 5xx at error and the rest at info', (code) => {
    expect(logLevelOf(code)).toBe(ERROR_TABLE[code].status >= 500 ? 'error' : 'info');
  });
});
