/**
 * Who may open a snapshot stream: the authenticator over real grpc-js Metadata. (The end-to-end
 * refusal, UNAUTHENTICATED with nothing pushed, is in test/e2e/security-stream.test.ts.)
 */
import * as grpc from '@grpc/grpc-js';
import type { PeerCertificate } from 'node:tls';
import { joinTokenMetadata } from '#proto/grpc';
import { createStreamAuthenticator, subjectOf, type AuthenticatedCall } from './stream-auth.js';

const TOKEN = 'a-join-token-of-enough-length';
const NEXT = 'the-next-token-during-rotation';

function call(metadata: grpc.Metadata, subject?: Record<string, string>): AuthenticatedCall {
  const sslPeerCertificate = subject ? ({ subject } as unknown as PeerCertificate) : undefined;
  return { metadata, getAuthContext: () => ({ transportSecurityType: subject ? 'ssl' : undefined, sslPeerCertificate }) };
}

const raw = (value: string) => {
  const metadata = new grpc.Metadata();
  metadata.set('authorization', value);
  return metadata;
};

describe.each([
  ['join token', { joinTokens: [TOKEN], clientCertificates: false }],
  ['join tokens during a rotation', { joinTokens: [TOKEN, NEXT], clientCertificates: false }],
])('%s', (_name, options) => {
  const authenticate = createStreamAuthenticator(options);

  test.each(options.joinTokens)('the token %s is accepted as join-token', (token) => {
    expect(authenticate(call(joinTokenMetadata(token)))).toEqual({ method: 'join-token' });
  });

  test.each<[string, grpc.Metadata, string]>([
    ['no metadata', new grpc.Metadata(), 'join token required'],
    ['another scheme', raw(`Basic ${TOKEN}`), 'join token required'],
    ['wrong token', joinTokenMetadata('not-the-token-at-all'), 'join token not accepted'],
    ['a prefix of the token', joinTokenMetadata(TOKEN.slice(0, -1)), 'join token not accepted'],
    ['the token plus a character', joinTokenMetadata(`${TOKEN}x`), 'join token not accepted'],
  ])('%s → DATAPLANE_UNAUTHENTICATED', (_row, metadata, message) => {
    expect(authenticate(call(metadata))).toMatchObject({ code: 'DATAPLANE_UNAUTHENTICATED', message: expect.stringContaining(message) });
  });
});

test('mutual TLS: the client certificate subject is recorded', () => {
  const authenticate = createStreamAuthenticator({ joinTokens: [], clientCertificates: true });
  expect(authenticate(call(new grpc.Metadata(), { CN: 'dp-1', O: 'shop' }))).toEqual({ method: 'mtls', subject: 'CN=dp-1,O=shop' });
});

test('mutual TLS and a join token: both are required', () => {
  const authenticate = createStreamAuthenticator({ joinTokens: [TOKEN], clientCertificates: true });
  expect(authenticate(call(new grpc.Metadata(), { CN: 'dp-1' }))).toMatchObject({ code: 'DATAPLANE_UNAUTHENTICATED' });
  expect(authenticate(call(joinTokenMetadata(TOKEN), { CN: 'dp-1' }))).toEqual({ method: 'mtls', subject: 'CN=dp-1' });
});

test('nothing configured (loopback or GRPC_INSECURE): insecure', () => {
  expect(createStreamAuthenticator({ joinTokens: [], clientCertificates: false })(call(new grpc.Metadata()))).toEqual({ method: 'insecure' });
});

test('subjectOf joins multi-valued attributes', () => {
  expect(subjectOf({ subject: { CN: 'a', OU: ['x', 'y'] } } as unknown as PeerCertificate)).toBe('CN=a,OU=x+y');
  expect(subjectOf(undefined)).toBe('');
});
