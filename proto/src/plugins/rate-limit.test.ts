import { parseApiDefinition } from '../definition/index.js';
import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';
import { parseRate, rateLimitPlugin } from './rate-limit.js';

const withRateLimit = (config: unknown) => ({
  name: 'r',
  proxy: { listen_path: '/r/*', upstreams: { targets: [{ target: 'http://u' }] } },
  plugins: [{ name: 'rate_limit', config }],
});
const stored = (config: unknown) => parseApiDefinition(withRateLimit(config)).plugins[0].config;

test.each([
  ['10-S', 10, 1000],
  ['100-M', 100, 60_000],
  ['1000-H', 1000, 3_600_000],
  ['5000-D', 5000, 86_400_000],
  ['5-s', 5, 1000],
  [' 7 - m ', 7, 60_000],
  ['1000000-S', 1_000_000, 1000],
  ['1000000000-D', 1_000_000_000, 86_400_000],
])('parseRate(%j) = %d per %d ms', (text, count, periodMs) => {
  expect(parseRate(text)).toEqual({ count, periodMs });
});

test.each(['', '10', '10-', '-S', '10-W', '10-SS', '0-S', '-1-S', '1.5-S', '10/S', 'S-10', '1000001-S', '1000000001-D', '99999999999-D'])(
  'parseRate(%j) is not a rate',
  (text) => {
    expect(parseRate(text)).toBeNull();
  },
);

test('defaults filled, limit stored upper-cased without spaces; a stored config parses to itself', () => {
  const config = stored({ limit: ' 10-s' });
  expect(config).toEqual({ limit: '10-S', policy: 'local', trust_forward_headers: false, key: 'ip' });
  expect(stored(config)).toEqual(config);
  expect(stored({ limit: '1-D', policy: 'redis', trust_forward_headers: true, key: 'token' })).toEqual({
    limit: '1-D',
    policy: 'redis',
    trust_forward_headers: true,
    key: 'token',
  });
});

test.each([
  ['10-S', { count: 10, intervalUs: 100_000, windowUs: 1_000_000 }],
  ['3-S', { count: 3, intervalUs: 333_333, windowUs: 999_999 }],
  ['1000-H', { count: 1000, intervalUs: 3_600_000, windowUs: 3_600_000_000 }],
  ['1000000-S', { count: 1_000_000, intervalUs: 1, windowUs: 1_000_000 }],
])('%s compiles to a GCRA interval in whole µs whose window admits exactly the count', (limit, expected) => {
  const compiled = rateLimitPlugin.compile(rateLimitPlugin.schema.parse({ limit }));
  expect(compiled).toMatchObject({ ...expected, rate: limit, limitHeader: String(expected.count), policy: 'local', key: 'ip' });
  expect(compiled).not.toHaveProperty('trustForwardHeaders');
  expect(compiled.windowUs / compiled.intervalUs).toBe(compiled.count);
  expect(Object.isFrozen(compiled)).toBe(true);
});

const RATE_MESSAGE = 'must be a rate such as "10-S", "100-M", "1000-H" or "5000-D" (at least 1, at most 1000000 per second)';

test.each([
  ['limit missing', {}, 'plugins[0].config.limit is required'],
  ['config missing', undefined, 'plugins[0].config.limit is required'],
  ['config not an object', 'x', 'plugins[0].config must be an object'],
  ['limit with an unknown unit', { limit: '10-W' }, `plugins[0].config.limit ${RATE_MESSAGE}`],
  ['limit of zero', { limit: '0-S' }, `plugins[0].config.limit ${RATE_MESSAGE}`],
  ['limit over a million per second', { limit: '2000000-S' }, `plugins[0].config.limit ${RATE_MESSAGE}`],
  ['limit a number', { limit: 10 }, 'plugins[0].config.limit must be a string'],
  ['unknown policy', { limit: '10-S', policy: 'cluster' }, 'plugins[0].config.policy must be "local" or "redis"'],
  ['policy not lower-case', { limit: '10-S', policy: 'Redis' }, 'plugins[0].config.policy must be "local" or "redis"'],
  ['trust_forward_headers not a boolean', { limit: '10-S', trust_forward_headers: 'true' }, 'plugins[0].config.trust_forward_headers must be a boolean'],
  ['unknown key', { limit: '10-S', key: 'subject' }, 'plugins[0].config.key must be "ip" or "token"'],
])('refuses %s with a field-named error', (_row, config, message) => {
  const err = gatehouseErrorOf(() => parseApiDefinition(withRateLimit(config)));
  expect(err.code).toBe('VALIDATION_FAILED');
  expect(err.message).toBe(message);
});

test("Janus's redis block is accepted and dropped: the data plane's REDIS_URL is the store", () => {
  expect(stored({ limit: '10-S', policy: 'redis', redis: { dsn: 'redis://x:6379', prefix: 'limiter' } })).toEqual({
    limit: '10-S',
    policy: 'redis',
    trust_forward_headers: false,
    key: 'ip',
  });
});
