/** Loopback hosts: the places plaintext is allowed by default (gRPC to the control plane, a JWKS URI). */
import { isIPv4, isIPv6 } from 'node:net';

/** A literal loopback address (127.0.0.0/8, ::1) or `localhost`. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  if (h === 'localhost' || h === '::1') return true;
  const v4 = isIPv6(h) && h.startsWith('::ffff:') ? h.slice(7) : h;
  return isIPv4(v4) && v4.startsWith('127.');
}
