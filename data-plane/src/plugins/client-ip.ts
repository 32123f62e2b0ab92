/**
 * Who the client is, in one model for every reader (ip_restriction, rate_limit `key: ip`, `hash_on: ip`, the
 * access log, X-Forwarded-*, openid_connect's cookie flags): TRUSTED_PROXIES, CIDR ranges of the proxies in front of
 * the gateway, empty by default. The TCP peer is the client unless it is in those ranges; then X-Forwarded-For is
 * walked from the right, each entry being what a trusted hop saw, and the client is the first entry not in them (as
 * nginx's realip with `real_ip_recursive on` and Envoy's `xff_num_trusted_hops`). An entry that is no IP address
 * stops the walk: nothing to its left can be trusted, so the client is the last (trusted) hop checked. X-Real-IP is
 * never read. X-Forwarded-Proto and X-Forwarded-Host are taken only from a trusted peer, and only as one value;
 * X-Forwarded-For goes upstream appended to, as received.
 */
import type { IncomingMessage } from 'node:http';
import { addressWords, inRanges, type WordRange } from '#proto/plugins/ip-restriction';
import { parseAuthority } from '#proto/location';
import { cidrList, readVariable } from '#proto/env';
import { listenerScheme } from './request-framing.js';

/** TRUSTED_PROXIES compiled; empty: no peer is trusted and forwarded headers are never believed. */
export type TrustedProxies = readonly WordRange[];

export const NO_TRUSTED_PROXIES: TrustedProxies = Object.freeze([]);

/** `::ffff:127.0.0.1` (IPv4 on a dual-stack socket) is written as `127.0.0.1`. */
export function clientIpOf(remoteAddress: string | undefined): string | undefined {
  if (!remoteAddress) return undefined;
  return remoteAddress.startsWith('::ffff:') && remoteAddress.includes('.') ? remoteAddress.slice(7) : remoteAddress;
}

/** TRUSTED_PROXIES: comma-separated addresses and CIDR ranges, the data plane's setting (config.ts) read alone. */
export const TRUSTED_PROXIES = cidrList();

/** TRUSTED_PROXIES read from its text; throws a ConfigError when an entry is neither an address nor a range. */
export function parseTrustedProxies(text: string | undefined): TrustedProxies {
  return readVariable({ TRUSTED_PROXIES: text }, 'TRUSTED_PROXIES', TRUSTED_PROXIES);
}

function trustedAddress(address: string | undefined, trusted: TrustedProxies): boolean {
  if (address === undefined || trusted.length === 0) return false;
  const words = addressWords(address);
  return words !== null && inRanges(words, trusted);
}

/** Whether the request's TCP peer is a trusted proxy (its forwarded headers are then believed). */
export function peerTrusted(req: IncomingMessage, trusted: TrustedProxies): boolean {
  return trustedAddress(clientIpOf(req.socket.remoteAddress), trusted);
}

/** X-Forwarded-For as one list (node:http joins repeated lines with ", "); '' when absent. */
function forwardedFor(req: IncomingMessage): string {
  const header = req.headers['x-forwarded-for'];
  return Array.isArray(header) ? header.join(',') : (header ?? '');
}

/** The client's address (IPv6 lower case, as node writes a peer's), or 'unknown' when the socket has none (it closed). */
export function clientAddress(req: IncomingMessage, trusted: TrustedProxies): string {
  let address = clientIpOf(req.socket.remoteAddress);
  if (address === undefined) return 'unknown';
  if (!trustedAddress(address, trusted)) return address;
  const xff = forwardedFor(req);
  let end = xff.length;
  while (end > 0) {
    const comma = xff.lastIndexOf(',', end - 1);
    const entry = xff
      .slice(comma + 1, end)
      .trim()
      .toLowerCase();
    end = comma === -1 ? 0 : comma;
    if (entry === '' && end > 0) continue; // an empty list element (`a,,b`) is no hop
    if (addressWords(entry) === null) return address;
    address = clientIpOf(entry)!;
    if (!trustedAddress(address, trusted)) return address;
  }
  return address;
}

/** The one value of a header, or undefined when it is absent, repeated or a list. */
function singleValue(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return typeof value === 'string' && !value.includes(',') ? value.trim() : undefined;
}

/** The scheme the client used: the listener's, or a trusted peer's X-Forwarded-Proto (`http` or `https`). */
export function originalScheme(req: IncomingMessage, trusted: TrustedProxies): 'http' | 'https' {
  if (trusted.length > 0 && peerTrusted(req, trusted)) {
    const proto = singleValue(req, 'x-forwarded-proto')?.toLowerCase();
    if (proto === 'http' || proto === 'https') return proto;
  }
  return listenerScheme(req);
}

/** The host the client asked for: the Host header, or a trusted peer's X-Forwarded-Host when it is a host[:port]. */
export function originalHost(req: IncomingMessage, trusted: TrustedProxies): string | undefined {
  if (trusted.length > 0 && peerTrusted(req, trusted)) {
    const host = singleValue(req, 'x-forwarded-host');
    if (host !== undefined && parseAuthority(host) !== null) return host;
  }
  return req.headers.host;
}

/**
 * X-Forwarded-For for the upstream: the list as received with the peer appended (what every proxy does, so the
 * right-most entry is always one the gateway saw); an upstream reading it must walk it as clientAddress does.
 */
export function forwardedForUpstream(req: IncomingMessage): string | undefined {
  const peer = clientIpOf(req.socket.remoteAddress);
  const chain = forwardedFor(req).trim();
  if (peer === undefined) return chain === '' ? undefined : chain;
  return chain === '' ? peer : `${chain}, ${peer}`;
}
