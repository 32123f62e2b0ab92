/**
 * check() parses with the parser zod generates for each schema (field-path.ts compiledOf); these
 * properties hold it to zod's runtime parser, which the error path falls back to anyway: over inputs
 * generated from each schema's own shape, with wrong types, bad strings, unknown and missing members
 * mixed in, both accept the same inputs with the same output and reject the rest with the same issue.
 */
import fc from 'fast-check';
import type { z } from 'zod';
import { apiSchema } from './api-schema.js';
import { credentialSchema } from './basic-auth-credential-schema.js';
import { keyAuthCredentialSchema } from './key-auth-credential-schema.js';
import { compiledOf } from './field-path.js';
import { introspectionSettingsSchema, jwksSettingsSchema, jwtSettingsSchema, serverSchema, storageSettingsSchema } from './oauth-server-schema.js';
import { PLUGINS } from '../plugins/index.js';

const STRINGS = [
  '',
  'a',
  'A-b_c.1',
  'GET',
  'get',
  'G ET',
  '/',
  '/x',
  '/x/{id}/*',
  'x',
  '*',
  '*.example.com',
  'http://a:1',
  'ftp://a',
  '1s',
  '250ms',
  'bad',
  'rr',
  'WEIGHT',
  'HS256',
  'x-h',
  'a\nb',
];

/** Values a member of that name accepts (elsewhere any string or number): without them few inputs would pass. */
const VALID: Record<string, (string | number)[]> = {
  // Also plugin names, which are valid API names too.
  name: ['a', 'api-1.v2', 'cors', 'retry'],
  hosts: ['example.com', '*.Example.com'],
  listen_path: ['/x', '/x/{id}/*'],
  balancing: ['rr', 'WEIGHT', 'roundrobin', 'least_conn'],
  target: ['http://a:1', 'https://b'],
  methods: ['GET', 'post'],
  dial_timeout: ['1s', '100ms'],
  response_header_timeout: ['1s'],
  backoff: ['100ms', '0s'],
  predicate: ['statusCode == 0 || statusCode >= 500'],
  username: ['alice', 'a@b'],
  password_hash: [`scrypt$16384$8$1$${'s'.repeat(22)}$${'k'.repeat(43)}`],
  key_hash: [`sha256$${'k'.repeat(43)}`],
  key_names: ['apikey'],
  limit: ['10-S', '100-m', '512K', '1M'],
  domains: ['*', 'https://a.example'],
  request_headers: ['x-h', '*'],
  exposed_headers: ['x-h'],
  server_name: ['a'],
  realm: ['api'],
  content_types: ['application/json', 'text/*'],
  encodings: ['gzip', 'br'],
  alg: ['HS256', 'RS256'],
  key: ['secret'],
  auth_header_type: ['Bearer'],
  token_type_hint: ['access_token'],
  client_id: ['gh'],
  client_secret: ['s'],
  timeout: ['2s'],
  // jwt settings' JWKS form
  jwks_uri: ['https://idp.example/.well-known/jwks.json', 'http://127.0.0.1:8080/jwks', 'http://idp.example/jwks'],
  cooldown: ['30s', '1s'],
  max_stale: ['24h', '1s'],
  // health_check
  path: ['/healthz', '/h?full=1'],
  interval: ['10s', '500ms'],
  ejection: ['30s'],
  // health_check.active.headers, and the transformers' header maps
  'headers keys': ['x-h', 'X-Probe'],
  headers: ['1', 'health.internal'],
  // proxy.match_headers
  'match_headers keys': ['X-Canary', 'accept-version'],
  match_headers: ['true', 'v2.1'],
  // ip_restriction
  allow: ['10.0.0.0/8', '::1'],
  deny: ['192.0.2.7'],
  default_ttl: [60],
  cache_ttl: [0, 300, '5m', '1s'],
  statuses: [500, 503],
  grpc_statuses: ['UNAVAILABLE', 'resource_exhausted', 14],
  weight: [1, 5],
  // proxy_cache
  ttl: ['30s', '5m'],
  max_entry_size: ['1MB', '512k'],
  vary_headers: ['x-h', 'Accept-Language'],
  vary_query_params: ['page'],
  // request_mirror
  percentage: [0, 12.5, 100],
  // request_termination, redirect
  status_code: [503, 204, 302, 308],
  content_type: ['text/plain'],
  scheme: ['https', 'HTTP'],
  host: ['new.example.com', '[::1]'],
  port: [8443],
  // request_validator: `default` is the one schema keyword that takes any JSON value (ajv's strict mode refuses the rest)
  'body_schema keys': ['default'],
  allowed_content_types: ['application/json', 'application/*+json'],
  // openid_connect (client_id, client_secret and timeout above)
  issuer: ['https://idp.example', 'http://127.0.0.1:8080/realm', 'http://idp.example'],
  cookie_secret: ['c'.repeat(32)],
  redirect_path: ['/callback'],
  logout_path: ['/logout'],
  post_logout_redirect: ['/', '/bye?x=1'],
  cookie_name: ['sid'],
  session_ttl: ['1h'],
  user_header: ['X-User'],
};

/**
 * A quiet health_check.active as its refinement wants it, or few would pass: an HTTP probe (a path, no grpc) or a
 * gRPC one (grpc, and no path, method or statuses).
 */
function oneProbeKind(active: Record<string, unknown>): Record<string, unknown> {
  if (active.grpc === undefined) return active.path === undefined ? { ...active, path: VALID.path![0] } : active;
  const { path: _path, method: _method, statuses: _statuses, ...grpc } = active;
  return grpc;
}

/** A quiet upstreams as its refinements want it: balancing "hash" exactly when hash_on is given, with the members of its source. */
function oneBalancing(upstreams: Record<string, unknown>): Record<string, unknown> {
  const hashOn = upstreams.hash_on as Record<string, unknown> | undefined;
  if (hashOn === undefined) return upstreams;
  const { name, trust_forward_headers, ...rest } = hashOn;
  return { ...upstreams, balancing: 'hash', hash_on: hashOn.source === 'ip' ? { ...rest, trust_forward_headers } : { ...rest, name: name ?? 'x-user' } };
}

/** Something of another type, or nothing. */
const wrong = fc.oneof(fc.constant(undefined), fc.constant(null), fc.jsonValue({ maxDepth: 1 }));

/**
 * Values for `schema` (zod 4's `_zod.def.type`): of its shape, and when `noisy` sometimes not. Quiet
 * inputs are mostly accepted, noisy ones mostly rejected at some depth.
 */
function arbitraryOf(schema: z.core.$ZodType, noisy: boolean, depth = 0, member = ''): fc.Arbitrary<unknown> {
  const def = schema._zod.def as unknown as Record<string, unknown> & { type: string };
  const inner = (key: string) => arbitraryOf(def[key] as z.core.$ZodType, noisy, depth + 1, member);
  let shaped: fc.Arbitrary<unknown>;
  switch (def.type) {
    case 'object': {
      const shape = def.shape as Record<string, z.core.$ZodType>;
      const members = Object.fromEntries(Object.entries(shape).map(([key, s]) => [key, arbitraryOf(s, noisy, depth + 1, key)]));
      // Members a schema may go without are left out at times; the others (and a prefault's, whose inner
      // members are what gets checked) only as `wrong` does.
      const required = Object.keys(shape).filter((key) => !['optional', 'default'].includes(shape[key]._zod.def.type));
      shaped = fc
        .tuple(fc.record(members, { requiredKeys: required }), fc.option(fc.jsonValue({ maxDepth: 1 }), { nil: undefined, freq: 4 }))
        .map(([o, extra]) => (extra === undefined ? o : { ...o, unknown_member: extra }));
      if (!noisy && 'grpc' in shape && 'path' in shape) shaped = shaped.map((o) => oneProbeKind(o as Record<string, unknown>));
      if (!noisy && 'hash_on' in shape) shaped = shaped.map((o) => oneBalancing(o as Record<string, unknown>));
      break;
    }
    case 'array':
      shaped = depth > 20 ? fc.constant([]) : fc.oneof({ arbitrary: fc.array(inner('element'), { minLength: 1, maxLength: 3 }), weight: 12 }, fc.constant([]));
      break;
    case 'optional':
    case 'nullable':
    case 'default':
    case 'prefault':
    case 'readonly':
      shaped = inner('innerType');
      break;
    case 'pipe':
      // z.preprocess is a pipe from a transform, which takes anything: generate for what it feeds.
      shaped = (def.in as z.core.$ZodType)._zod.def.type === 'transform' ? inner('out') : inner('in');
      break;
    case 'union':
      shaped = fc.oneof(...(def.options as z.core.$ZodType[]).map((s) => arbitraryOf(s, noisy, depth + 1, member)));
      break;
    case 'record': {
      // A record's keys as its member's (`headers keys`), when VALID has them and the input is quiet.
      const keys = !noisy && VALID[`${member} keys`] ? VALID[`${member} keys`]!.map(String) : STRINGS;
      shaped = fc.dictionary(fc.constantFrom(...keys), inner('valueType'), { maxKeys: 3 });
      break;
    }
    case 'enum': {
      const entries = Object.values(def.entries as Record<string, string>);
      shaped = fc.constantFrom(...entries, ...(noisy ? ['nope'] : []));
      break;
    }
    case 'literal':
      shaped = fc.constantFrom(...(def.values as unknown[]));
      break;
    case 'string':
    case 'number': {
      const usual = VALID[member] ? fc.constantFrom(...VALID[member]) : def.type === 'string' ? fc.constantFrom(...STRINGS) : fc.integer({ min: 1, max: 10 });
      const others =
        def.type === 'string'
          ? [fc.constantFrom(...STRINGS), fc.string({ maxLength: 6 })]
          : [fc.integer({ min: -3, max: 100_000 }), fc.constantFrom(0, 200, 503, 1001, 1.5, 86_401)];
      shaped = noisy ? fc.oneof(usual, ...others) : usual;
      break;
    }
    case 'boolean':
      shaped = fc.boolean();
      break;
    default:
      shaped = fc.jsonValue({ maxDepth: 2 });
  }
  return noisy ? fc.oneof({ arbitrary: shaped, weight: 10 }, { arbitrary: wrong, weight: 1 }) : shaped;
}

const SCHEMAS: [string, z.ZodType][] = [
  ['api', apiSchema],
  ['oauth server', serverSchema],
  ['jwt settings', jwtSettingsSchema],
  ['jwks settings', jwksSettingsSchema],
  ['storage settings', storageSettingsSchema],
  ['introspection settings', introspectionSettingsSchema],
  ['basic auth credential', credentialSchema],
  ['key auth credential', keyAuthCredentialSchema],
  ...Object.entries(PLUGINS).map(([name, plugin]): [string, z.ZodType] => [`plugin ${name}`, plugin.schema as z.ZodType]),
];

const verdict = (result: z.ZodSafeParseResult<unknown>) =>
  result.success ? { data: result.data } : { path: result.error.issues[0].path, message: result.error.issues[0].message };

describe.each(SCHEMAS)('the %s schema: generated parser and runtime parser', (_, schema) => {
  test('accept the same inputs with the same output, and reject the rest with the same first issue', () => {
    const fast = compiledOf(schema);
    let accepted = 0;
    fc.assert(
      fc.property(
        fc.boolean().chain((noisy) => arbitraryOf(schema, noisy)),
        (input) => {
          const runtime = schema.safeParse(input);
          if (runtime.success) accepted++;
          expect(verdict(fast.safeParse(input))).toStrictEqual(verdict(runtime));
        },
      ),
      { numRuns: 500 },
    );
    // Otherwise the property would only have compared rejections.
    expect(accepted).toBeGreaterThanOrEqual(20);
  });
});
