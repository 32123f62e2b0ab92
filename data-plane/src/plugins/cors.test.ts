import { corsPlugin } from '#proto/plugins/cors';
import { preflightHeaders } from './cors.js';

const compiled = (config: unknown) => corsPlugin.compile(corsPlugin.schema.parse(config));
const VARY = 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers';

test.each([
  [
    'allowed origin, method and headers: every header, the origin echoed',
    { domains: ['https://a.com'], methods: ['GET', 'PUT'], request_headers: ['X-A'], allow_credentials: true, max_age: 600 },
    ['https://a.com', 'put', 'X-A'],
    {
      vary: VARY,
      'access-control-allow-origin': 'https://a.com',
      'access-control-allow-methods': 'GET, PUT',
      'access-control-allow-headers': 'x-a',
      'access-control-allow-credentials': 'true',
      'access-control-max-age': '600',
    },
  ],
  [
    'any origin: "*", never the origin',
    { domains: ['*'] },
    ['https://x.com', 'GET', undefined],
    { vary: VARY, 'access-control-allow-origin': '*', 'access-control-allow-methods': 'GET, POST, HEAD' },
  ],
  ['origin not allowed: no CORS headers', { domains: ['https://a.com'] }, ['https://b.com', 'GET', undefined], { vary: VARY }],
  ['method not allowed: no CORS headers', { methods: ['GET'] }, ['https://a.com', 'DELETE', undefined], { vary: VARY }],
  ['a header not allowed: no CORS headers', { request_headers: ['X-A'] }, ['https://a.com', 'GET', 'X-A, X-B'], { vary: VARY }],
  [
    '"*" request headers allow any',
    { request_headers: ['*'] },
    ['https://a.com', 'GET', 'X-Anything'],
    { vary: VARY, 'access-control-allow-origin': '*', 'access-control-allow-methods': 'GET, POST, HEAD', 'access-control-allow-headers': 'x-anything' },
  ],
] as const)('preflight: %s', (_row, config, [origin, method, requested], expected) => {
  expect(preflightHeaders(compiled(config), origin, method, requested)).toEqual(expected);
});
