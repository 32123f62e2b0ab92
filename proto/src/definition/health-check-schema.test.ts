import { parseApiDefinition, parseOAuthServer } from './index.js';
import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';

const VALID = {
  name: 'checked',
  proxy: { listen_path: '/checked/*', upstreams: { targets: [{ target: 'http://localhost:9000' }] } },
};

/** VALID with `proxy.upstreams.health_check` set to `check` as it is (nulls included). */
const withCheck = (check: unknown) => ({ ...VALID, proxy: { ...VALID.proxy, upstreams: { ...VALID.proxy.upstreams, health_check: check } } });
const checkOf = (check: unknown) => parseApiDefinition(withCheck(check)).proxy.upstreams.health_check;

const FIELD = 'proxy.upstreams.health_check';
const DURATION_100MS_1H = 'must be a duration from "100ms" to "1h"';
const DURATION_10MS_1M = 'must be a duration from "10ms" to "1m"';
const THRESHOLD = 'must be an integer from 1 to 100';
const PATH = 'must start with "/" and hold only printable ASCII without spaces or "#"';

test('fills the defaults of each part given, and adds no part that was not', () => {
  expect(checkOf({ active: { path: '/healthz' } })).toEqual({
    active: { path: '/healthz', interval: '10s', timeout: '2s', healthy_threshold: 2, unhealthy_threshold: 3 },
  });
  expect(checkOf({ passive: {} })).toEqual({ passive: { unhealthy_threshold: 5, ejection: '30s' } });
  expect(checkOf({ active: { path: '/h' }, passive: {} })).toEqual({
    active: { path: '/h', interval: '10s', timeout: '2s', healthy_threshold: 2, unhealthy_threshold: 3 },
    passive: { unhealthy_threshold: 5, ejection: '30s' },
  });
});

test('keeps the values given, and parses its own output to itself', () => {
  const given = {
    active: { path: '/status?deep=1', interval: '1m30s', timeout: '250ms', healthy_threshold: 1, unhealthy_threshold: 100 },
    passive: { unhealthy_threshold: 7, ejection: '1h' },
  };
  const api = parseApiDefinition(withCheck(given));
  expect(api.proxy.upstreams.health_check).toEqual(given);
  expect(parseApiDefinition(api)).toEqual(api);
});

test('method, statuses and headers are kept when given (statuses deduplicated and sorted, headers sorted by name), and absent when not', () => {
  expect(
    checkOf({
      active: { path: '/h', method: 'HEAD', statuses: [204, 200, 204], headers: { 'X-B': '2', Host: 'health.internal' } },
      passive: { statuses: [503, 429] },
    }),
  ).toEqual({
    active: {
      path: '/h',
      interval: '10s',
      timeout: '2s',
      healthy_threshold: 2,
      unhealthy_threshold: 3,
      method: 'HEAD',
      statuses: [200, 204],
      headers: { Host: 'health.internal', 'X-B': '2' },
    },
    passive: { unhealthy_threshold: 5, ejection: '30s', statuses: [429, 503] },
  });
  const plain = checkOf({ active: { path: '/h' }, passive: {} })!;
  expect(Object.keys(plain.active!)).not.toEqual(expect.arrayContaining(['method']));
  expect(plain.active).not.toHaveProperty('statuses');
  expect(plain.active).not.toHaveProperty('headers');
  expect(plain.passive).not.toHaveProperty('statuses');
});

test('a gRPC health check: no path; its service defaults to "" (the whole server); headers allowed', () => {
  expect(checkOf({ active: { grpc: {} } })).toEqual({
    active: { interval: '10s', timeout: '2s', healthy_threshold: 2, unhealthy_threshold: 3, grpc: { service: '' } },
  });
  const named = checkOf({ active: { grpc: { service: 'helloworld.Greeter' }, headers: { 'X-Probe': '1' } } })!;
  expect(named.active).toMatchObject({ grpc: { service: 'helloworld.Greeter' }, headers: { 'X-Probe': '1' } });
  expect(named.active).not.toHaveProperty('path');
  const api = parseApiDefinition(withCheck({ active: { grpc: {} } }));
  expect(parseApiDefinition(api)).toEqual(api);
});

test('absent, or null, means no health check at all (no member)', () => {
  expect(parseApiDefinition(VALID).proxy.upstreams).not.toHaveProperty('health_check');
  expect(parseApiDefinition(withCheck(null)).proxy.upstreams).not.toHaveProperty('health_check');
  expect(parseApiDefinition(withCheck(undefined)).proxy.upstreams).not.toHaveProperty('health_check');
  // A null part is an absent part.
  expect(checkOf({ active: null, passive: {} })).toEqual({ passive: { unhealthy_threshold: 5, ejection: '30s' } });
  expect(checkOf({ active: { path: '/h' }, passive: null })).not.toHaveProperty('passive');
});

test.each<[string, string, string | number]>([
  ['interval at its minimum', 'interval', '100ms'],
  ['interval at its maximum', 'interval', '1h'],
  ['interval in a compound form', 'interval', '1m30s'],
  ['timeout at its minimum', 'timeout', '10ms'],
  ['timeout at its maximum', 'timeout', '1m'],
  ['healthy_threshold at 1', 'healthy_threshold', 1],
  ['healthy_threshold at 100', 'healthy_threshold', 100],
  ['unhealthy_threshold at 1', 'unhealthy_threshold', 1],
  ['unhealthy_threshold at 100', 'unhealthy_threshold', 100],
  ['path "/"', 'path', '/'],
  ['path with a query', 'path', '/health?full=1&x=%20'],
  ['path with every other printable character', 'path', '/!"$%&\'()*+,-./:;<=>?@[\\]^_`{|}~'],
])('accepts active %s', (_name, key, value) => {
  expect(checkOf({ active: { path: '/h', [key]: value } })!.active![key as 'path']).toBe(value);
});

test.each<[string, string, string | number]>([
  ['unhealthy_threshold at 1', 'unhealthy_threshold', 1],
  ['unhealthy_threshold at 100', 'unhealthy_threshold', 100],
  ['ejection at its minimum', 'ejection', '100ms'],
  ['ejection at its maximum', 'ejection', '1h'],
])('accepts passive %s', (_name, key, value) => {
  expect(checkOf({ passive: { [key]: value } })!.passive![key as 'ejection']).toBe(value);
});

test.each<[string, unknown, string, string]>([
  ['an empty object', {}, FIELD, 'must have "active", "passive" or both'],
  ['both parts null', { active: null, passive: null }, FIELD, 'must have "active", "passive" or both'],
  ['not an object', 'yes', FIELD, 'must be an object'],
  ['active without a path', { active: {} }, `${FIELD}.active.path`, 'is required (or grpc, for a gRPC health check)'],
  ['path a number', { active: { path: 5 } }, `${FIELD}.active.path`, 'must be a string'],
  ['path a list', { active: { path: ['/a'] } }, `${FIELD}.active.path`, 'must be a string'],
  ['active not an object', { active: true }, `${FIELD}.active`, 'must be an object'],
  ['passive not an object', { passive: 5 }, `${FIELD}.passive`, 'must be an object'],
  ['path not starting with "/"', { active: { path: 'healthz' } }, `${FIELD}.active.path`, PATH],
  ['path empty', { active: { path: '' } }, `${FIELD}.active.path`, PATH],
  ['path a full URL', { active: { path: 'http://other/healthz' } }, `${FIELD}.active.path`, PATH],
  ['path with a space', { active: { path: '/health z' } }, `${FIELD}.active.path`, PATH],
  ['path with "#"', { active: { path: '/health#x' } }, `${FIELD}.active.path`, PATH],
  ['grpc with a path', { active: { grpc: {}, path: '/h' } }, `${FIELD}.active.path`, 'cannot be given with grpc'],
  ['grpc with a method', { active: { grpc: {}, method: 'HEAD' } }, `${FIELD}.active.method`, 'cannot be given with grpc'],
  ['grpc with statuses', { active: { grpc: {}, statuses: [200] } }, `${FIELD}.active.statuses`, 'cannot be given with grpc'],
  ['grpc not an object', { active: { grpc: 'x' } }, `${FIELD}.active.grpc`, 'must be an object'],
  ['grpc service with a space', { active: { grpc: { service: 'a b' } } }, `${FIELD}.active.grpc.service`, 'must be printable ASCII without spaces'],
  ['grpc service too long', { active: { grpc: { service: 'a'.repeat(257) } } }, `${FIELD}.active.grpc.service`, 'must be at most 256 characters'],
  ['path with CRLF', { active: { path: '/h\r\nX-Injected: 1' } }, `${FIELD}.active.path`, PATH],
  ['path with a tab', { active: { path: '/h\tx' } }, `${FIELD}.active.path`, PATH],
  ['path with DEL', { active: { path: '/h\u007f' } }, `${FIELD}.active.path`, PATH],
  ['path not ASCII', { active: { path: '/santé' } }, `${FIELD}.active.path`, PATH],
  ['interval below 100ms', { active: { path: '/h', interval: '99ms' } }, `${FIELD}.active.interval`, DURATION_100MS_1H],
  ['interval above 1h', { active: { path: '/h', interval: '61m' } }, `${FIELD}.active.interval`, DURATION_100MS_1H],
  ['interval junk', { active: { path: '/h', interval: 'often' } }, `${FIELD}.active.interval`, DURATION_100MS_1H],
  ['interval zero', { active: { path: '/h', interval: '0s' } }, `${FIELD}.active.interval`, DURATION_100MS_1H],
  ['interval empty', { active: { path: '/h', interval: '' } }, `${FIELD}.active.interval`, DURATION_100MS_1H],
  ['interval a number', { active: { path: '/h', interval: 10 } }, `${FIELD}.active.interval`, 'must be a string'],
  ['timeout below 10ms', { active: { path: '/h', timeout: '9ms' } }, `${FIELD}.active.timeout`, DURATION_10MS_1M],
  ['timeout above 1m', { active: { path: '/h', timeout: '61s' } }, `${FIELD}.active.timeout`, DURATION_10MS_1M],
  ['timeout junk', { active: { path: '/h', timeout: '2 s' } }, `${FIELD}.active.timeout`, DURATION_10MS_1M],
  ['healthy_threshold 0', { active: { path: '/h', healthy_threshold: 0 } }, `${FIELD}.active.healthy_threshold`, THRESHOLD],
  ['healthy_threshold 101', { active: { path: '/h', healthy_threshold: 101 } }, `${FIELD}.active.healthy_threshold`, THRESHOLD],
  ['healthy_threshold fractional', { active: { path: '/h', healthy_threshold: 1.5 } }, `${FIELD}.active.healthy_threshold`, THRESHOLD],
  ['healthy_threshold a string', { active: { path: '/h', healthy_threshold: '2' } }, `${FIELD}.active.healthy_threshold`, THRESHOLD],
  ['unhealthy_threshold 0', { active: { path: '/h', unhealthy_threshold: 0 } }, `${FIELD}.active.unhealthy_threshold`, THRESHOLD],
  ['unhealthy_threshold 101', { active: { path: '/h', unhealthy_threshold: 101 } }, `${FIELD}.active.unhealthy_threshold`, THRESHOLD],
  ['unhealthy_threshold negative', { active: { path: '/h', unhealthy_threshold: -3 } }, `${FIELD}.active.unhealthy_threshold`, THRESHOLD],
  ['passive unhealthy_threshold 0', { passive: { unhealthy_threshold: 0 } }, `${FIELD}.passive.unhealthy_threshold`, THRESHOLD],
  ['passive unhealthy_threshold 101', { passive: { unhealthy_threshold: 101 } }, `${FIELD}.passive.unhealthy_threshold`, THRESHOLD],
  ['passive unhealthy_threshold fractional', { passive: { unhealthy_threshold: 2.5 } }, `${FIELD}.passive.unhealthy_threshold`, THRESHOLD],
  ['passive unhealthy_threshold a string', { passive: { unhealthy_threshold: 'five' } }, `${FIELD}.passive.unhealthy_threshold`, THRESHOLD],
  ['ejection below 100ms', { passive: { ejection: '99ms' } }, `${FIELD}.passive.ejection`, DURATION_100MS_1H],
  ['ejection above 1h', { passive: { ejection: '2h' } }, `${FIELD}.passive.ejection`, DURATION_100MS_1H],
  ['ejection junk', { passive: { ejection: 'forever' } }, `${FIELD}.passive.ejection`, DURATION_100MS_1H],
  ['a bad active field beside a valid passive', { active: { path: 'x' }, passive: {} }, `${FIELD}.active.path`, PATH],
  ['method POST', { active: { path: '/h', method: 'POST' } }, `${FIELD}.active.method`, 'must be "GET" or "HEAD"'],
  ['statuses empty', { active: { path: '/h', statuses: [] } }, `${FIELD}.active.statuses`, 'must not be empty'],
  ['a status of 99', { active: { path: '/h', statuses: [200, 99] } }, `${FIELD}.active.statuses[1]`, 'must be a status from 100 to 599'],
  ['a status of 600', { passive: { statuses: [600] } }, `${FIELD}.passive.statuses[0]`, 'must be a status from 100 to 599'],
  ['a fractional status', { passive: { statuses: [502.5] } }, `${FIELD}.passive.statuses[0]`, 'must be a whole number'],
  ['a header name with a space', { active: { path: '/h', headers: { 'X Probe': '1' } } }, `${FIELD}.active.headers.X Probe`, 'is not a valid header name'],
  [
    'a header value with CRLF',
    { active: { path: '/h', headers: { 'X-Probe': '1\r\nX-Injected: 1' } } },
    `${FIELD}.active.headers.X-Probe`,
    'must not contain control characters (CR, LF, NUL)',
  ],
  [
    'a hop-by-hop header',
    { active: { path: '/h', headers: { Connection: 'close' } } },
    `${FIELD}.active.headers.Connection`,
    'is a header a probe cannot send',
  ],
  [
    'Content-Length',
    { active: { path: '/h', headers: { 'content-length': '5' } } },
    `${FIELD}.active.headers.content-length`,
    'is a header a probe cannot send',
  ],
])('rejects %s', (_name, check, field, message) => {
  const err = gatehouseErrorOf(() => parseApiDefinition(withCheck(check)));
  expect(err.code).toBe('VALIDATION_FAILED');
  expect(err.status).toBe(400);
  expect(err.field).toBe(field);
  expect(err.message).toBe(`${field} ${message}`);
});

test('an OAuth endpoint takes a health check too, its errors named under that endpoint', () => {
  const server = (check: unknown) => ({
    name: 'auth',
    oauth_endpoints: { token: { listen_path: '/auth/token', upstreams: { targets: [{ target: 'http://auth' }], health_check: check } } },
    token_strategy: { name: 'storage', settings: {} },
  });
  expect(parseOAuthServer(server({ passive: {} })).oauth_endpoints.token.upstreams.health_check).toEqual({
    passive: { unhealthy_threshold: 5, ejection: '30s' },
  });
  const err = gatehouseErrorOf(() => parseOAuthServer(server({})));
  expect(err).toMatchObject({
    field: 'oauth_endpoints.token.upstreams.health_check',
    message: 'oauth_endpoints.token.upstreams.health_check must have "active", "passive" or both',
  });
});
