/**
 * The certificates of a snapshot's Gateway API HTTPS listeners (SnapshotContent.gatewayTls) as the TLS contexts the
 * GATEWAY_HTTPS_PORT listener picks by SNI (proxy/listener.ts). Built with the serving table, so a certificate
 * changes with the snapshot that carries it; a certificate or key that does not parse fails the build (the
 * snapshot is NACKed and the held one keeps serving).
 */
import type { SecureContext } from 'node:tls';
import { tlsContextOf, type GatewayListenerTls } from '#proto/snapshot/codec';

export interface GatewayTlsContexts {
  /**
   * The context for a client's SNI name, as a Gateway listener's hostname matches it: the exact hostname, else the
   * longest wildcard (`*.example.org` matches `a.example.org` and `a.b.example.org`, not `example.org`), else the
   * listener without hostname; undefined: no listener takes that name.
   */
  forServername(servername: string): SecureContext | undefined;
  /** The listener without hostname's certificates, for a client that sends no SNI; undefined: none. */
  readonly fallback: { readonly cert: string[]; readonly key: string[] } | undefined;
}

/** Throws, naming the listener (never the key), when a certificate or key does not parse or they do not match. */
export function buildGatewayTls(listeners: readonly GatewayListenerTls[] | undefined): GatewayTlsContexts | null {
  if (!listeners?.length) return null;
  const exact = new Map<string, SecureContext>();
  const wildcard = new Map<string, SecureContext>();
  let any: SecureContext | undefined;
  let fallback: GatewayTlsContexts['fallback'];
  // Sorted by name: of two listeners with the same hostname, the first keeps it.
  for (const listener of listeners) {
    const pair = { cert: listener.certificates.map((c) => c.certificate_chain), key: listener.certificates.map((c) => c.private_key) };
    let context: SecureContext;
    try {
      context = tlsContextOf(listener.certificates);
    } catch (err) {
      throw new Error(`gateway listener ${listener.name}: its certificate or key does not parse or they do not match (${(err as Error).message})`);
    }
    const hostname = listener.hostname.toLowerCase();
    if (hostname === '') {
      any ??= context;
      fallback ??= pair;
    } else if (hostname.startsWith('*.')) {
      if (!wildcard.has(hostname.slice(1))) wildcard.set(hostname.slice(1), context);
    } else if (!exact.has(hostname)) exact.set(hostname, context);
  }
  return {
    forServername(servername) {
      const name = servername.toLowerCase();
      const found = exact.get(name);
      if (found) return found;
      // ".b.example.org", then ".example.org", then ".org": the first found is the longest suffix.
      for (let dot = name.indexOf('.'); dot !== -1; dot = name.indexOf('.', dot + 1)) {
        const context = wildcard.get(name.slice(dot));
        if (context) return context;
      }
      return any;
    },
    fallback,
  };
}
