/**
 * The Location of the gateway's redirects (PROXY_HTTP_REDIRECT_PORT's HTTP → HTTPS listener and the `redirect`
 * plugin): one reading of the request's Host and one way to write a URL, so that neither can put anything into the
 * header that is not a scheme, a host, a port and the request's path and query.
 */

/** A DNS name (labels of letters, digits and inner hyphens) or a bracketed IPv6 literal. */
const HOSTNAME = String.raw`(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*\.?|\[[0-9a-f:.]+\])`;

/** A host for a Location: a DNS name or IPv4 address, or a bracketed IPv6 literal (no port). */
export const LOCATION_HOST = new RegExp(`^${HOSTNAME}$`, 'i');
const AUTHORITY = new RegExp(`^${HOSTNAME}(?::(\\d{1,5}))?$`, 'i');

export interface Authority {
  /** Lower-cased; an IPv6 literal keeps its brackets. */
  hostname: string;
  /** The port the client named, null when none. */
  port: number | null;
}

/** A Host header's name and port, or null when it is missing or not a host (`evil.com/x`, `a b`, CR LF, a port over 65535). */
export function parseAuthority(host: string | undefined): Authority | null {
  if (!host || host.length > 255) return null;
  const m = AUTHORITY.exec(host);
  if (!m) return null;
  const port = m[1] === undefined ? null : Number(m[1]);
  if (port !== null && port > 65_535) return null;
  return { hostname: (m[1] === undefined ? host : host.slice(0, host.length - m[1].length - 1)).toLowerCase(), port };
}

export type Scheme = 'http' | 'https';

const DEFAULT_PORT: Readonly<Record<Scheme, number>> = { http: 80, https: 443 };

/** Anything but visible ASCII, percent-encoded (an h2 `:path` is not held to the request line's characters). */
const NOT_VISIBLE_ASCII = /[^\x21-\x7e]/gu;

/**
 * `scheme://hostname[:port]pathAndQuery`, the port left out when it is the scheme's own. `hostname` must be a
 * parseAuthority hostname or a LOCATION_HOST; `pathAndQuery` starts with `/`.
 */
export function locationOf(scheme: Scheme, hostname: string, port: number | null, pathAndQuery: string): string {
  const authority = port === null || port === DEFAULT_PORT[scheme] ? hostname : `${hostname}:${port}`;
  const target = pathAndQuery.replace(NOT_VISIBLE_ASCII, (c) => [...Buffer.from(c)].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join(''));
  return `${scheme}://${authority}${target}`;
}
