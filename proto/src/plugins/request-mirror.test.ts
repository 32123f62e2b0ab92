import { parseApiDefinition } from '../definition/index.js';
import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';
import { compilePlugins } from './index.js';

const withMirror = (config: unknown) =>
  parseApiDefinition({
    name: 'm',
    proxy: { listen_path: '/m/*', upstreams: { targets: [{ target: 'http://u' }] } },
    plugins: [{ name: 'request_mirror', config }],
  });

test('the target is stored as its origin; percentage defaults to 100 and may be fractional', () => {
  expect(withMirror({ target: 'HTTP://Orders-V2:8080' }).plugins[0]!.config).toEqual({ target: 'http://orders-v2:8080', percentage: 100 });
  expect(withMirror({ target: 'https://shadow.example.com:443/', percentage: 12.5 }).plugins[0]!.config).toEqual({
    target: 'https://shadow.example.com',
    percentage: 12.5,
  });
  expect(compilePlugins(withMirror({ target: 'http://m:1', percentage: 0 }).plugins)).toEqual([
    { name: 'request_mirror', config: { origin: 'http://m:1', percentage: 0 } },
  ]);
});

test.each([
  [{}, 'plugins[0].config.target is required'],
  [{ target: 'ftp://m' }, 'plugins[0].config.target is not a valid URL'],
  [{ target: 'http://{svc}:8080' }, 'plugins[0].config.target must not contain placeholders (the mirror target is one fixed origin)'],
  [{ target: 'http://u:p@m' }, 'plugins[0].config.target must not contain user info'],
  [{ target: 'http://m/v2' }, 'plugins[0].config.target must be an origin such as "http://orders-v2:8080" (no path, query or fragment)'],
  [{ target: 'http://m?x=1' }, 'plugins[0].config.target must be an origin such as "http://orders-v2:8080" (no path, query or fragment)'],
  [{ target: 'http://m', percentage: 101 }, 'plugins[0].config.percentage must be at most 100'],
  [{ target: 'http://m', percentage: -1 }, 'plugins[0].config.percentage must be at least 0'],
  [{ target: 'http://m', percentage: '50' }, 'plugins[0].config.percentage must be a number from 0 to 100'],
])('%j is refused: %s', (config, message) => {
  expect(gatehouseErrorOf(() => withMirror(config)).message).toBe(message);
});
