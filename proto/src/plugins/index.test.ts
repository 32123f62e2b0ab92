import { parseApiDefinition } from '../definition/index.js';
import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';
import { compilePlugins, PLUGIN_ORDER, PLUGINS } from './index.js';

const api = (plugins: unknown[]) =>
  parseApiDefinition({ name: 'p', proxy: { listen_path: '/p/*', upstreams: { targets: [{ target: 'http://u' }] } }, plugins });

test('execution order is the documented one', () => {
  expect(PLUGIN_ORDER).toEqual([
    'cors',
    'ip_restriction',
    'rate_limit',
    'oauth2',
    'basic_auth',
    'key_auth',
    'openid_connect',
    'acl',
    'body_limit',
    'request_termination',
    'redirect',
    'request_validator',
    'grpc_web',
    'request_transformer',
    'request_mirror',
    'retry',
    'cb',
    'response_transformer',
    'compression',
    'proxy_cache',
  ]);
  expect(Object.keys(PLUGINS)).toEqual(PLUGIN_ORDER);
});

test('compiled plugins follow the execution order, whatever the definition order', () => {
  const def = api([
    { name: 'response_transformer', config: { add: { headers: { 'X-R': '1' } } } },
    { name: 'body_limit', config: { limit: '1K' } },
    { name: 'request_transformer', config: {} },
    { name: 'oauth2', config: { server_name: 's' } },
    { name: 'cors', config: {} },
  ]);
  expect(compilePlugins(def.plugins).map((p) => p.name)).toEqual(['cors', 'oauth2', 'body_limit', 'request_transformer', 'response_transformer']);
});

test('a disabled plugin is validated but not compiled', () => {
  const def = api([
    { name: 'cors', enabled: false, config: {} },
    { name: 'body_limit', config: { limit: '1K' } },
  ]);
  expect(def.plugins[0]).toMatchObject({ name: 'cors', enabled: false, config: { domains: ['*'] } });
  expect(compilePlugins(def.plugins)).toEqual([{ name: 'body_limit', config: { bytes: 1024 } }]);
  expect(gatehouseErrorOf(() => api([{ name: 'body_limit', enabled: false, config: { limit: 'x' } }])).message).toBe(
    'plugins[0].config.limit must be a size such as "10B", "512K", "1M" or "2G"',
  );
});

test('no enabled plugin compiles to an empty list', () => {
  expect(compilePlugins([])).toEqual([]);
  expect(compilePlugins(api([{ name: 'cors', enabled: false }]).plugins)).toEqual([]);
});

test('compiled plugins are frozen', () => {
  const [cors] = compilePlugins(api([{ name: 'cors', config: { domains: ['a.com'] } }]).plugins);
  expect(Object.isFrozen(cors)).toBe(true);
  expect(Object.isFrozen(cors.config)).toBe(true);
});

test('an error names the plugin by its index in the definition', () => {
  expect(gatehouseErrorOf(() => api([{ name: 'cors' }, { name: 'cors' }])).message).toBe('plugins[1].name: duplicate plugin "cors"');
  expect(gatehouseErrorOf(() => api([{ name: 'cors' }, { name: 'no_such_plugin' }])).message).toBe('plugins[1].name: unknown plugin "no_such_plugin"');
});

test('grpc_web has no options: {} and no config are the same, unknown members dropped', () => {
  expect(api([{ name: 'grpc_web' }]).plugins[0]).toEqual({ name: 'grpc_web', enabled: true, config: {} });
  expect(api([{ name: 'grpc_web', config: { extra: 1 } }]).plugins[0]).toEqual({ name: 'grpc_web', enabled: true, config: {} });
});
