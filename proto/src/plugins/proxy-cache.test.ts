import { parseApiDefinition } from '../definition/index.js';
import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';
import { compilePlugins } from './index.js';

const api = (config: unknown) =>
  parseApiDefinition({
    name: 'pc',
    proxy: { listen_path: '/pc/*', upstreams: { targets: [{ target: 'http://u' }] } },
    plugins: [{ name: 'proxy_cache', config }],
  });

const DEFAULTS = {
  ttl: '30s',
  methods: ['GET', 'HEAD'],
  statuses: [200, 301, 404],
  content_types: null,
  vary_headers: [],
  vary_query_params: null,
  cache_control: true,
  max_entry_size: '1MB',
  per_consumer: false,
};

describe('proxy_cache config', () => {
  test('defaults are filled and stored', () => {
    expect(api(undefined).plugins[0].config).toEqual(DEFAULTS);
    expect(api({}).plugins[0].config).toEqual(DEFAULTS);
  });

  test('values are stored normalised: methods upper-cased in canonical order, statuses sorted, names deduplicated', () => {
    expect(
      api({
        ttl: ' 5m ',
        methods: 'head,get',
        statuses: [404, 200, 200],
        content_types: ['Application/JSON', 'text/*', 'application/json'],
        vary_headers: ['X-Tenant', 'x-tenant', 'Accept-Language'],
        vary_query_params: ['page', 'page', 'size'],
        cache_control: false,
        max_entry_size: '512 k',
        per_consumer: true,
      }).plugins[0].config,
    ).toEqual({
      ttl: '5m',
      methods: ['GET', 'HEAD'],
      statuses: [200, 404],
      content_types: ['application/json', 'text/*'],
      vary_headers: ['x-tenant', 'accept-language'],
      vary_query_params: ['page', 'size'],
      cache_control: false,
      max_entry_size: '512K',
      per_consumer: true,
    });
    expect(api({ vary_query_params: [] }).plugins[0].config).toMatchObject({ vary_query_params: [] });
  });

  test('compiles to milliseconds, bytes, sets and a media-range matcher', () => {
    const [plugin] = compilePlugins(api({ ttl: '1h30m', methods: ['GET'], content_types: ['text/*'], vary_query_params: ['a'], max_entry_size: '2M' }).plugins);
    expect(plugin.name).toBe('proxy_cache');
    expect(plugin.config).toMatchObject({
      ttlMs: 5_400_000,
      methods: new Set(['GET']),
      statuses: new Set([200, 301, 404]),
      contentTypes: { anyType: false, exactTypes: new Set(), typeWildcards: [{ type: 'text', prefix: '', suffix: '' }] },
      varyHeaders: [],
      varyQueryParams: new Set(['a']),
      cacheControl: true,
      maxEntryBytes: 2 * 1024 ** 2,
    });
    expect(Object.isFrozen(plugin.config)).toBe(true);
    expect(compilePlugins(api({}).plugins)[0].config).toMatchObject({ contentTypes: null, varyQueryParams: null, ttlMs: 30_000 });
  });

  test.each([
    [{ ttl: '0s' }, 'plugins[0].config.ttl must be a duration from "1s" to "24h", e.g. "30s"'],
    [{ ttl: '500ms' }, 'plugins[0].config.ttl must be a duration from "1s" to "24h", e.g. "30s"'],
    [{ ttl: '25h' }, 'plugins[0].config.ttl must be a duration from "1s" to "24h", e.g. "30s"'],
    [{ ttl: 30 }, 'plugins[0].config.ttl'],
    [{ methods: ['POST'] }, 'plugins[0].config.methods[0] must be "GET" or "HEAD"'],
    [{ methods: [] }, 'plugins[0].config.methods must not be empty'],
    [{ statuses: [] }, 'plugins[0].config.statuses must not be empty'],
    [{ statuses: [99] }, 'plugins[0].config.statuses[0] must be an HTTP status'],
    [{ statuses: ['200'] }, 'plugins[0].config.statuses[0] must be an HTTP status'],
    [{ content_types: ['json'] }, 'plugins[0].config.content_types[0] must be a media type'],
    [{ content_types: [] }, 'plugins[0].config.content_types must not be empty (leave it out for any type)'],
    [{ vary_headers: ['bad header'] }, 'plugins[0].config.vary_headers[0] is not a valid header name'],
    [{ vary_query_params: [''] }, 'plugins[0].config.vary_query_params[0] must not be empty'],
    [{ cache_control: 'yes' }, 'plugins[0].config.cache_control'],
    [{ max_entry_size: '0' }, 'plugins[0].config.max_entry_size must be a size from "1B" to "1G", such as "512K" or "1MB"'],
    [{ max_entry_size: '2G' }, 'plugins[0].config.max_entry_size must be a size from "1B" to "1G"'],
  ])('%j is refused naming the field', (config, message) => {
    expect(gatehouseErrorOf(() => api(config)).message).toContain(message);
  });
});
