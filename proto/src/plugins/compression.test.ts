import { parseApiDefinition } from '../definition/index.js';
import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';
import { mediaTypeListed, compressionPlugin, DEFAULT_COMPRESSIBLE_TYPES } from './compression.js';

const withCompression = (config: unknown, extra: object = {}) => ({
  name: 'c',
  proxy: { listen_path: '/c/*', upstreams: { targets: [{ target: 'http://u' }] } },
  plugins: [{ name: 'compression', ...extra, ...(config === undefined ? {} : { config }) }],
});
const stored = (config: unknown) => parseApiDefinition(withCompression(config)).plugins[0];
const compiled = (config: unknown) => compressionPlugin.compile(stored(config).config as never);

test("Janus's form (no config) is accepted and stored with the defaults", () => {
  expect(parseApiDefinition(withCompression(undefined, { enabled: true })).plugins[0]).toEqual({
    name: 'compression',
    enabled: true,
    config: { min_size: 1024, content_types: DEFAULT_COMPRESSIBLE_TYPES, encodings: ['br', 'gzip'] },
  });
});

test('lists may be comma strings; media types are lower-cased and deduplicated; "*" means any', () => {
  expect(stored({ content_types: 'Text/HTML, text/html,*', encodings: 'GZIP' }).config).toEqual({
    min_size: 1024,
    content_types: ['text/html', '*/*'],
    encodings: ['gzip'],
  });
});

test.each([
  ['application/json', true],
  ['application/json; charset=utf-8', true],
  ['APPLICATION/JSON', true],
  ['text/html', true],
  ['text/event-stream', true],
  ['application/problem+json', true],
  ['application/atom+xml', true],
  ['image/svg+xml', true],
  ['application/javascript', true],
  ['image/png', false],
  ['application/octet-stream', false],
  ['application/zip', false],
  ['video/mp4', false],
  ['application/jsonx', false],
  ['text', false],
  ['', false],
])('default content types: %j → %s', (type, expected) => {
  expect(mediaTypeListed(compiled({}), type)).toBe(expected);
});

test('configured wildcards and "*/*"', () => {
  const c = compiled({ content_types: ['application/vnd.*', 'font/woff'] });
  expect(mediaTypeListed(c, 'application/vnd.api+json')).toBe(true);
  expect(mediaTypeListed(c, 'font/woff')).toBe(true);
  expect(mediaTypeListed(c, 'text/html')).toBe(false);
  expect(mediaTypeListed(compiled({ content_types: ['*/*'] }), 'image/png')).toBe(true);
});

test('compiled: sizes and codings ready to use, frozen', () => {
  const c = compiled({ min_size: 0, encodings: ['gzip'] });
  expect(c).toMatchObject({ minSize: 0, br: false, gzip: true, anyType: false });
  expect(Object.isFrozen(c)).toBe(true);
});

test.each([
  ['min_size negative', { min_size: -1 }, 'plugins[0].config.min_size must be at least 0'],
  ['min_size not an integer', { min_size: 1.5 }, 'plugins[0].config.min_size must be an integer number of bytes'],
  ['min_size a string', { min_size: '1K' }, 'plugins[0].config.min_size must be an integer number of bytes'],
  ['content_types empty', { content_types: [] }, 'plugins[0].config.content_types must not be empty'],
  [
    'content type without subtype',
    { content_types: ['text/'] },
    'plugins[0].config.content_types[0] must be a media type such as "application/json", "text/*" or "application/*+json"',
  ],
  [
    'content type with a space',
    { content_types: ['text/plain', 'text /x'] },
    'plugins[0].config.content_types[1] must be a media type such as "application/json", "text/*" or "application/*+json"',
  ],
  [
    'content type wildcard major',
    { content_types: ['*/json'] },
    'plugins[0].config.content_types[0] must be a media type such as "application/json", "text/*" or "application/*+json"',
  ],
  ['unknown encoding', { encodings: ['deflate'] }, 'plugins[0].config.encodings[0] must be "br" or "gzip"'],
  ['encodings empty', { encodings: [] }, 'plugins[0].config.encodings must not be empty'],
])('refuses %s', (_row, config, message) => {
  expect(gatehouseErrorOf(() => parseApiDefinition(withCompression(config))).message).toBe(message);
});
