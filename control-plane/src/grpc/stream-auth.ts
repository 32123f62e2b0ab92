/**
 * Who may open a snapshot stream. Checked when the stream opens, before anything is sent:
 * - mutual TLS (GRPC_TLS_CA set): the TLS handshake already verified the client certificate
 *   against the CA; the stream records its subject;
 * - join token (GRPC_JOIN_TOKEN): the call's `authorization: Bearer <token>` metadata must be one of
 *   the accepted tokens, compared in constant time (with mTLS too, when both are configured);
 * - neither: `insecure` (loopback, or GRPC_INSECURE=true; config.ts refuses anything else).
 */
import type { PeerCertificate } from 'node:tls';
import { GatehouseError } from '#proto/errors';
import { presentedJoinToken } from '#proto/grpc';
import { matchesAnySecret, secretDigest } from '#proto/secret-compare';
import type * as grpc from '@grpc/grpc-js';

/** How a data plane authenticated, as GET /dataplanes shows it. */
export type DataPlaneAuth = { method: 'mtls'; subject: string } | { method: 'join-token' } | { method: 'insecure' };

/** What the authenticator reads of a call. */
export type AuthenticatedCall = Pick<grpc.ServerDuplexStream<unknown, unknown>, 'metadata' | 'getAuthContext'>;

export type StreamAuthenticator = (call: AuthenticatedCall) => DataPlaneAuth | GatehouseError;

export interface StreamAuthOptions {
  /** Accepted join tokens; empty = none required. */
  joinTokens: readonly string[];
  /** True when the server requires client certificates (mutual TLS). */
  clientCertificates: boolean;
}

/** `CN=dp-1,O=shop` from a peer certificate's subject. */
export function subjectOf(certificate: PeerCertificate | undefined): string {
  const subject = certificate?.subject as unknown as Record<string, string | string[]> | undefined;
  if (!subject) return '';
  return Object.entries(subject)
    .map(([key, value]) => `${key}=${[value].flat().join('+')}`)
    .join(',');
}

export function createStreamAuthenticator({ joinTokens, clientCertificates }: StreamAuthOptions): StreamAuthenticator {
  const digests = joinTokens.map(secretDigest);
  return (call) => {
    if (digests.length > 0) {
      const token = presentedJoinToken(call.metadata);
      if (token === undefined) {
        return new GatehouseError('DATAPLANE_UNAUTHENTICATED', 'join token required: set GRPC_JOIN_TOKEN on the data plane');
      }
      if (!matchesAnySecret(token, digests)) {
        return new GatehouseError('DATAPLANE_UNAUTHENTICATED', "join token not accepted: GRPC_JOIN_TOKEN differs from the control plane's");
      }
    }
    if (clientCertificates) return { method: 'mtls', subject: subjectOf(call.getAuthContext()?.sslPeerCertificate) };
    return digests.length > 0 ? { method: 'join-token' } : { method: 'insecure' };
  };
}
