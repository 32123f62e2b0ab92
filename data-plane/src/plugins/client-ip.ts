/**
 * The client's address as rate_limit (`key: ip`) and ip_restriction see it: the TCP peer, or with
 * `trust_forward_headers` the right-most X-Forwarded-For entry (the address the proxy in front of the
 * gateway saw; every entry left of it was written by the client and can be forged), else X-Real-IP; a
 * value that is not an IP address is ignored.
 */
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';

/** `::ffff:127.0.0.1` (IPv4 on a dual-stack socket) is written as `127.0.0.1`. Also the access log's and X-Forwarded-For's. */
export function clientIpOf(remoteAddress: string | undefined): string | undefined {
  if (!remoteAddress) return undefined;
  return remoteAddress.startsWith('::ffff:') && remoteAddress.includes('.') ? remoteAddress.slice(7) : remoteAddress;
}

function forwardedIp(req: IncomingMessage): string | undefined {
  // node:http joins repeated X-Forwarded-For lines with ", ": the last entry is the nearest proxy's.
  const header = req.headers['x-forwarded-for'];
  const xff = Array.isArray(header) ? header.join(',') : header;
  if (xff) {
    const nearest = xff.slice(xff.lastIndexOf(',') + 1).trim();
    if (isIP(nearest)) return clientIpOf(nearest.toLowerCase());
  }
  const real = req.headers['x-real-ip'];
  const value = typeof real === 'string' ? real.trim() : undefined;
  return value && isIP(value) ? clientIpOf(value.toLowerCase()) : undefined;
}

/** The address (IPv6 lower case, as node writes a peer's), or 'unknown' when the socket has none (it closed). */
export function clientIp(req: IncomingMessage, trustForwardHeaders: boolean): string {
  return (trustForwardHeaders ? forwardedIp(req) : undefined) ?? clientIpOf(req.socket.remoteAddress) ?? 'unknown';
}
