import { parseApiDefinition } from '../definition/index.js';
import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';
import { bodyLimitPlugin, parseSize } from './body-limit.js';

const withLimit = (config: unknown) => ({
  name: 'b',
  proxy: { listen_path: '/b/*', upstreams: { targets: [{ target: 'http://u' }] } },
  plugins: [{ name: 'body_limit', config }],
});

test.each([
  ['10B', 10],
  ['10', 10],
  ['512K', 512 * 1024],
  ['512kb', 512 * 1024],
  ['1M', 1024 ** 2],
  ['1.5M', 1.5 * 1024 ** 2],
  ['40MB', 40 * 1024 ** 2],
  ['2G', 2 * 1024 ** 3],
  ['1T', 1024 ** 4],
  [' 1 m ', 1024 ** 2],
  ['0B', 0],
])('parseSize(%j) = %d bytes', (text, bytes) => {
  expect(parseSize(text)).toBe(bytes);
});

test.each(['', 'M', '1X', '-1M', '1MM', '1e3', 'lots', '99999999999999T'])('parseSize(%j) is not a size', (text) => {
  expect(parseSize(text)).toBeNull();
});

test('stored upper-cased without spaces; compiled to bytes', () => {
  const api = parseApiDefinition(withLimit({ limit: ' 1 m' }));
  expect(api.plugins[0]).toEqual({ name: 'body_limit', enabled: true, config: { limit: '1M' } });
  expect(bodyLimitPlugin.compile({ limit: '1M' })).toEqual({ bytes: 1024 ** 2 });
});

test.each([
  ['limit missing', {}, 'plugins[0].config.limit is required'],
  ['config missing', undefined, 'plugins[0].config.limit is required'],
  ['limit not a size', { limit: '1X' }, 'plugins[0].config.limit must be a size such as "10B", "512K", "1M" or "2G"'],
  ['limit a number', { limit: 10 }, 'plugins[0].config.limit must be a string'],
])('refuses %s', (_row, config, message) => {
  expect(gatehouseErrorOf(() => parseApiDefinition(withLimit(config))).message).toBe(message);
});
