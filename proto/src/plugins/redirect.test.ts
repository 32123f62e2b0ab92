import { compileApi } from '../compile/index.js';
import { parseApiDefinition } from '../definition/index.js';
import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';
import { redirectPlugin } from './redirect.js';

const withConfig = (config: unknown) => ({
  name: 'r',
  proxy: { listen_path: '/r/*', upstreams: { targets: [{ target: 'http://u' }] } },
  plugins: [{ name: 'redirect', config }],
});
const stored = (config: unknown) => parseApiDefinition(withConfig(config)).plugins[0].config;

test('defaults: 302, strip_path false; only the parts given are stored; scheme and host lower-cased', () => {
  expect(stored({ scheme: 'HTTPS' })).toEqual({ status_code: 302, scheme: 'https', strip_path: false });
  expect(stored({ status_code: 308, host: 'New.Example.COM', port: 8443, path: '/v2/', strip_path: true })).toEqual({
    status_code: 308,
    host: 'new.example.com',
    port: 8443,
    path: '/v2/',
    strip_path: true,
  });
  expect(stored({ host: '[2001:DB8::1]' })).toMatchObject({ host: '[2001:db8::1]' });
  expect(stored({ host: '192.0.2.7' })).toMatchObject({ host: '192.0.2.7' });
});

test('compiled: unset parts are null (taken from the request)', () => {
  expect(redirectPlugin.compile({ status_code: 301, path: '/x', strip_path: true })).toEqual({
    status: 301,
    scheme: null,
    host: null,
    port: null,
    path: '/x',
    prefix: true,
  });
  expect(redirectPlugin.compile({ status_code: 302, scheme: 'https', strip_path: false })).toEqual({
    status: 302,
    scheme: 'https',
    host: null,
    port: null,
    path: null,
    prefix: false,
  });
});

test.each([
  ['nothing to change', {}, 'plugins[0].config must set at least one of scheme, host, port or path (a redirect to the same URL loops)'],
  ['a status that is no redirect', { status_code: 200, scheme: 'https' }, 'plugins[0].config.status_code must be 301, 302, 303, 307 or 308'],
  ['300', { status_code: 300, scheme: 'https' }, 'plugins[0].config.status_code must be 301, 302, 303, 307 or 308'],
  ['another scheme', { scheme: 'javascript' }, 'plugins[0].config.scheme must be "http" or "https"'],
  ['a host with a path', { host: 'evil.com/x' }, 'plugins[0].config.host must be a host name or an IP address ("[2001:db8::1]" for IPv6), without a port'],
  ['a host with a port', { host: 'a.com:80' }, 'plugins[0].config.host must be a host name or an IP address ("[2001:db8::1]" for IPv6), without a port'],
  ['a host with user info', { host: 'a@b.com' }, 'plugins[0].config.host must be a host name or an IP address ("[2001:db8::1]" for IPv6), without a port'],
  [
    'a host with CR LF',
    { host: 'a.com\r\nSet-Cookie: a=1' },
    'plugins[0].config.host must be a host name or an IP address ("[2001:db8::1]" for IPv6), without a port',
  ],
  ['port 0', { port: 0 }, 'plugins[0].config.port must be at least 1'],
  ['port 65536', { port: 65_536 }, 'plugins[0].config.port must be at most 65535'],
  ['a port as a string', { port: '80' }, 'plugins[0].config.port must be an integer port'],
  ['a relative path', { path: 'x' }, 'plugins[0].config.path must be a path starting with "/" (percent-encoded, without ? or #)'],
  ['a path with a query', { path: '/x?a=1' }, 'plugins[0].config.path must be a path starting with "/" (percent-encoded, without ? or #)'],
  ['a path with a space', { path: '/a b' }, 'plugins[0].config.path must be a path starting with "/" (percent-encoded, without ? or #)'],
  ['a path with a bad escape', { path: '/a%zz' }, 'plugins[0].config.path must be a path starting with "/" (percent-encoded, without ? or #)'],
  ['a long path', { path: `/${'a'.repeat(1024)}` }, 'plugins[0].config.path is too long'],
  ['strip_path without path', { host: 'a.com', strip_path: true }, 'plugins[0].config.path is required with strip_path'],
])('refuses %s', (_row, config, message) => {
  expect(gatehouseErrorOf(() => parseApiDefinition(withConfig(config))).message).toBe(message);
});

describe('without host, the API must list an exact host (the Location never names a Host only the client chose)', () => {
  const api = (hosts: string[] | undefined, config: Record<string, unknown>, enabled = true) =>
    parseApiDefinition({ ...withConfig(config), ...(hosts && { hosts }), plugins: [{ name: 'redirect', enabled, config }] });

  test.each<[string, string[] | undefined]>([
    ['no hosts', undefined],
    ['only wildcard hosts', ['*.example.com', 'example.*']],
  ])('refused with %s', (_row, hosts) => {
    const err = gatehouseErrorOf(() => compileApi(api(hosts, { scheme: 'https' })));
    expect({ field: err.field, message: err.message }).toEqual({
      field: 'plugins[0].config.host',
      message: 'plugins[0].config.host is required when the API lists no exact host in hosts (the Location would name whatever Host the client sent)',
    });
  });

  test.each<[string, string[] | undefined, Record<string, unknown>, boolean]>([
    ['an exact host among wildcards', ['*.example.com', 'shop.example.com'], { scheme: 'https' }, true],
    ['its own host, no API hosts', undefined, { scheme: 'https', host: 'new.example.com' }, true],
    ['disabled', undefined, { scheme: 'https' }, false],
  ])('compiles with %s', (_row, hosts, config, enabled) => {
    expect(() => compileApi(api(hosts, config, enabled))).not.toThrow();
  });
});
