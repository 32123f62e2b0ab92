/**
 * The Gateway API HTTPS listeners a snapshot carries (Snapshot.gateway_tls): their canonical form, its digest (a
 * line of the content hash, hash.ts contentHash), the check of what arrives, and the TLS context of a listener's
 * certificates (tlsContextOf), which the control plane builds before it sends a listener and the data plane when it
 * serves it: both sides judge a certificate and key alike.
 */
import { hash as digest } from 'node:crypto';
import { createSecureContext, type SecureContext } from 'node:tls';
import { GatehouseError } from '../errors.js';
import { isPlainObject } from '../definition/field-path.js';
import type * as wire from '../wire.js';

/** Held as the wire has it; a snapshot without listeners holds none (undefined), never []. */
export type GatewayListenerTls = wire.GatewayListenerTls;

const byName = (a: GatewayListenerTls, b: GatewayListenerTls) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

/** Sorted by name, each member in one key order: what the wire carries and the digest covers. */
export function canonicalGatewayTls(listeners: readonly GatewayListenerTls[]): GatewayListenerTls[] | undefined {
  if (listeners.length === 0) return undefined;
  return listeners
    .map(({ name, hostname, port, certificates }) => ({
      name,
      hostname,
      port,
      certificates: certificates.map(({ certificate_chain, private_key }) => ({ certificate_chain, private_key })),
    }))
    .sort(byName);
}

const digests = new WeakMap<readonly GatewayListenerTls[], string>();

/** sha256 hex of the canonical list's JSON (keys included: a rotated key is a change of content). */
export function gatewayTlsDigest(listeners: readonly GatewayListenerTls[]): string {
  let known = digests.get(listeners);
  if (known === undefined) digests.set(listeners, (known = digest('sha256', JSON.stringify(canonicalGatewayTls(listeners) ?? []), 'hex')));
  return known;
}

/** Same listeners, certificates and keys. */
export const sameGatewayTls = (a: readonly GatewayListenerTls[] | undefined, b: readonly GatewayListenerTls[] | undefined): boolean =>
  a === b || (a !== undefined && b !== undefined && gatewayTlsDigest(a) === gatewayTlsDigest(b));

const fail = (message: string): never => {
  throw new GatehouseError('VALIDATION_FAILED', `snapshot gateway_tls: ${message}`);
};

/** A received GatewayTls (null or absent = none) → the listeners held, canonical; VALIDATION_FAILED on a bad shape. */
export function gatewayTlsFromMessage(message: unknown): GatewayListenerTls[] | undefined {
  if (message === null || message === undefined) return undefined;
  if (!isPlainObject(message) || !Array.isArray(message.listeners)) return fail('must hold a listeners list');
  const listeners = message.listeners.map((l: unknown, i: number): GatewayListenerTls => {
    if (!isPlainObject(l) || typeof l.name !== 'string' || typeof l.hostname !== 'string' || !Array.isArray(l.certificates))
      return fail(`listeners[${i}] must have a name, a hostname and certificates`);
    const port = Number(l.port ?? 0);
    if (!Number.isInteger(port) || port < 0 || port > 65535) return fail(`listeners[${i}] (${l.name}) has an invalid port`);
    if (l.certificates.length === 0) return fail(`listeners[${i}] (${l.name}) has no certificate`);
    const certificates = l.certificates.map((c: unknown) => {
      if (!isPlainObject(c) || typeof c.certificate_chain !== 'string' || typeof c.private_key !== 'string')
        return fail(`listeners[${i}] (${l.name}): each certificate needs a certificate_chain and a private_key`);
      return { certificate_chain: c.certificate_chain, private_key: c.private_key };
    });
    return { name: l.name, hostname: l.hostname, port, certificates };
  });
  return canonicalGatewayTls(listeners);
}

/** TLS 1.2 at least, as the proxy listener's default. */
const MIN_VERSION = 'TLSv1.2';

/**
 * The context serving `certificates` (one chain per key: an RSA and an ECDSA pair, say). Throws when one does not
 * parse or a key is not its certificate's; the message is OpenSSL's, never the key.
 */
export function tlsContextOf(certificates: readonly wire.TlsCertificate[]): SecureContext {
  return createSecureContext({
    cert: certificates.map((c) => c.certificate_chain),
    key: certificates.map((c) => c.private_key),
    minVersion: MIN_VERSION,
  });
}
