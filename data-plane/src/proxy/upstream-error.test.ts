import { GatehouseError } from '#proto/errors';
import { upstreamError } from './upstream-error.js';

function coded(code: string): Error {
  return Object.assign(new Error(code), { code });
}

describe('upstreamError: undici/socket errors → gateway codes, by err.code', () => {
  test.each([
    ['connect timeout', coded('UND_ERR_CONNECT_TIMEOUT'), 'UPSTREAM_TIMEOUT', 504],
    ['headers timeout', coded('UND_ERR_HEADERS_TIMEOUT'), 'UPSTREAM_TIMEOUT', 504],
    ['body timeout', coded('UND_ERR_BODY_TIMEOUT'), 'UPSTREAM_TIMEOUT', 504],
    ['socket ETIMEDOUT', coded('ETIMEDOUT'), 'UPSTREAM_TIMEOUT', 504],
    ['refused', coded('ECONNREFUSED'), 'UPSTREAM_UNREACHABLE', 502],
    ['reset', coded('ECONNRESET'), 'UPSTREAM_UNREACHABLE', 502],
    ['unresolvable', coded('ENOTFOUND'), 'UPSTREAM_UNREACHABLE', 502],
    ['DNS try again', coded('EAI_AGAIN'), 'UPSTREAM_UNREACHABLE', 502],
    ['undici socket error', coded('UND_ERR_SOCKET'), 'UPSTREAM_UNREACHABLE', 502],
    ['self-signed certificate', coded('DEPTH_ZERO_SELF_SIGNED_CERT'), 'UPSTREAM_UNREACHABLE', 502],
    ['no code at all', new Error('boom'), 'UPSTREAM_UNREACHABLE', 502],
    ['not even an Error', 'boom', 'UPSTREAM_UNREACHABLE', 502],
    ['dual-stack connect: first coded inner error', new AggregateError([coded('ETIMEDOUT'), coded('ECONNREFUSED')]), 'UPSTREAM_TIMEOUT', 504],
    ['wrapped in a cause', new Error('outer', { cause: coded('ECONNREFUSED') }), 'UPSTREAM_UNREACHABLE', 502],
  ])('%s', (_name, err, code, status) => {
    const translated = upstreamError(err);
    expect(translated).toBeInstanceOf(GatehouseError);
    expect(translated.code).toBe(code);
    expect(translated.status).toBe(status);
  });

  test('a GatehouseError passes through unchanged', () => {
    const err = new GatehouseError('BAD_UPSTREAM_HOST', 'bad host');
    expect(upstreamError(err)).toBe(err);
  });
});
