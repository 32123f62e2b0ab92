import { readFileSync } from 'node:fs';
import { ERROR_TABLE, GatehouseError, gatewayBody, adminBody, logLevelOf, type ErrorCode } from './errors.js';

const codes = Object.keys(ERROR_TABLE) as ErrorCode[];
const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

describe('error table', () => {
  test.each(codes)('%s is documented in the README with its status', (code) => {
    const row = readme.split('\n').find((line) => line.startsWith(`| \`${code}\` |`));
    expect(row).toBeDefined();
    expect(row).toContain(`| ${ERROR_TABLE[code].status} |`);
  });

  test('the README documents no code that does not exist', () => {
    const documented = [...readme.matchAll(/^\| `([A-Z_]+)` \| \d{3} \|/gm)].map((m) => m[1]);
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

  test('admin body is {"error": message}', () => {
    expect(JSON.parse(adminBody(new GatehouseError('API_NOT_FOUND', 'api definition not found')))).toEqual({
      error: 'api definition not found',
    });
  });

  test.each(codes)('%s logs 5xx at error and the rest at info', (code) => {
    expect(logLevelOf(code)).toBe(ERROR_TABLE[code].status >= 500 ? 'error' : 'info');
  });
});
