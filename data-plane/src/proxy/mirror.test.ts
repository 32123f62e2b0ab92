import { shadowHost } from './mirror.js';

test.each([
  ['orders', 'orders-shadow'],
  ['orders:8080', 'orders-shadow:8080'],
  ['127.0.0.1:9000', '127.0.0.1-shadow:9000'],
  ['api.example.com', 'api.example.com-shadow'],
  ['[::1]:9000', '[::1]:9000'],
  ['[2001:db8::1]', '[2001:db8::1]'],
])('the shadow Host of %s is %s (before the port, as Envoy)', (host, shadow) => {
  expect(shadowHost(host)).toBe(shadow);
});
