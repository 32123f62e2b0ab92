import { parseApiDefinition } from '../definition/index.js';
import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';
import { MAX_TERMINATION_BODY_BYTES, requestTerminationPlugin } from './request-termination.js';

const withConfig = (config: unknown) => ({
  name: 't',
  proxy: { listen_path: '/t/*', upstreams: { targets: [{ target: 'http://u' }] } },
  plugins: [{ name: 'request_termination', config }],
});
const stored = (config: unknown) => parseApiDefinition(withConfig(config)).plugins[0].config;

test('defaults: 503 with the message "request terminated", stored as sent', () => {
  expect(stored(undefined)).toEqual({ status_code: 503, message: 'request terminated' });
  expect(stored({ status_code: 410 })).toEqual({ status_code: 410, message: 'request terminated' });
});

test('message: the gateway error shape (a JSON string, application/json)', () => {
  expect(stored({ message: 'down for maintenance' })).toEqual({ status_code: 503, message: 'down for maintenance' });
  expect(requestTerminationPlugin.compile({ status_code: 503, message: 'down "now"' })).toEqual({
    status: 503,
    contentType: 'application/json',
    body: '"down \\"now\\""',
    message: 'down "now"',
  });
});

test('body: sent as written with its content_type', () => {
  const config = stored({ status_code: 200, body: 'ok\n', content_type: 'text/plain; charset=utf-8' });
  expect(config).toEqual({ status_code: 200, body: 'ok\n', content_type: 'text/plain; charset=utf-8' });
  expect(requestTerminationPlugin.compile(config as never)).toEqual({ status: 200, contentType: 'text/plain; charset=utf-8', body: 'ok\n', message: null });
  expect(stored({ status_code: 200, body: '', content_type: 'text/plain' })).toEqual({ status_code: 200, body: '', content_type: 'text/plain' });
});

test('a status without content (204, 205, 304) takes neither and gets no default message', () => {
  for (const status_code of [204, 205, 304]) {
    expect(stored({ status_code })).toEqual({ status_code });
    expect(requestTerminationPlugin.compile({ status_code })).toEqual({ status: status_code, contentType: null, body: '', message: null });
  }
});

test(`a body of ${MAX_TERMINATION_BODY_BYTES} bytes is taken, one more is refused (message counted as sent, JSON-quoted)`, () => {
  expect(stored({ body: 'a'.repeat(MAX_TERMINATION_BODY_BYTES), content_type: 'text/plain' })).toMatchObject({ status_code: 503 });
  expect(stored({ message: 'a'.repeat(MAX_TERMINATION_BODY_BYTES - 2) })).toMatchObject({ status_code: 503 });
});

test.each([
  ['a 1xx status', { status_code: 101 }, 'plugins[0].config.status_code must be at least 200'],
  ['a status over 599', { status_code: 600 }, 'plugins[0].config.status_code must be at most 599'],
  ['a status as a string', { status_code: '503' }, 'plugins[0].config.status_code must be an integer HTTP status'],
  ['message and body', { message: 'm', body: 'b', content_type: 'text/plain' }, 'plugins[0].config.body must not be set together with message'],
  ['body without content_type', { body: 'b' }, 'plugins[0].config.content_type is required with body'],
  ['content_type without body', { message: 'm', content_type: 'text/plain' }, 'plugins[0].config.content_type is allowed only with body'],
  [
    'content_type with CR LF',
    { body: 'b', content_type: 'text/plain\r\nSet-Cookie: a=1' },
    'plugins[0].config.content_type must not contain control characters (CR, LF, NUL)',
  ],
  ['an empty content_type', { body: 'b', content_type: '' }, 'plugins[0].config.content_type must not be empty'],
  ['a message for a 204', { status_code: 204, message: 'm' }, 'plugins[0].config.message must not be set: a 204 has no content'],
  ['a body for a 304', { status_code: 304, body: 'b', content_type: 'text/plain' }, 'plugins[0].config.body must not be set: a 304 has no content'],
  ['a body over 64 KiB', { body: 'é'.repeat(MAX_TERMINATION_BODY_BYTES / 2 + 1), content_type: 'text/plain' }, 'plugins[0].config.body is over 65536 bytes'],
  ['a message over 64 KiB as sent', { message: 'a'.repeat(MAX_TERMINATION_BODY_BYTES - 1) }, 'plugins[0].config.message is over 65536 bytes'],
  ['a message not a string', { message: 5 }, 'plugins[0].config.message must be a string'],
])('refuses %s', (_row, config, message) => {
  expect(gatehouseErrorOf(() => parseApiDefinition(withConfig(config))).message).toBe(message);
});
