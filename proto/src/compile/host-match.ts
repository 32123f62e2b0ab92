/**
 * Host conditions (docs/proxy.md "Proxy behaviour"): exact names, `*.example.com` (any deeper name, never `example.com`
 * itself) and `example.*` (any name under `example.`). Case-insensitive, the request's port ignored.
 */
import { fieldError } from '../definition/field-path.js';

const LABEL = '[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?';
/** A DNS-style host name, lower case (underscores allowed, as in service names). */
export const HOSTNAME = new RegExp(`^${LABEL}(?:\\.${LABEL})*$`);
const IPV6 = /^\[[0-9a-f:.]+\]$/;

/**
 * A Host header value reduced to what host conditions compare: lower-cased, port and a trailing
 * dot removed (`Example.COM.:8080` → `example.com`, `[::1]:80` → `[::1]`). '' when absent.
 */
export function normalizeHost(raw: string | undefined): string {
  if (!raw) return '';
  let h = raw.trim().toLowerCase();
  if (h.startsWith('[')) {
    const end = h.indexOf(']');
    return end < 0 ? h : h.slice(0, end + 1);
  }
  const colon = h.indexOf(':');
  if (colon >= 0 && colon === h.lastIndexOf(':')) h = h.slice(0, colon);
  return h.endsWith('.') ? h.slice(0, -1) : h;
}

/**
 * Validate one `hosts` entry and return it in its compiled form (lower-cased, port dropped, as the
 * request side is). `field` is e.g. `hosts[0]`. Throws GatehouseError VALIDATION_FAILED.
 */
export function compileHostPattern(pattern: string, field: string): string {
  const p = typeof pattern === 'string' ? normalizeHost(pattern) : '';
  const fail = (): never => {
    throw fieldError(field, 'must be a host name, optionally with a leading "*." or a trailing ".*" wildcard');
  };
  if (p === '') fail();
  if (IPV6.test(p)) return p;
  const name = p.startsWith('*.') ? p.slice(2) : p.endsWith('.*') ? p.slice(0, -2) : p;
  if (!HOSTNAME.test(name)) fail();
  return p;
}

/** The compiled patterns that name one host (no wildcard), in order. */
export function exactHosts(patterns: readonly string[]): string[] {
  return patterns.filter((p) => !p.startsWith('*.') && !p.endsWith('.*'));
}

export type HostMatcher = (normalizedHost: string) => boolean;

/** One matcher for a list of compiled patterns; an empty list matches any host. */
export function hostMatcher(patterns: readonly string[]): HostMatcher {
  if (patterns.length === 0) return () => true;
  const exact = new Set<string>();
  const suffixes: string[] = [];
  const prefixes: string[] = [];
  for (const p of patterns) {
    if (p.startsWith('*.'))
      suffixes.push(p.slice(1)); // '.example.com'
    else if (p.endsWith('.*'))
      prefixes.push(p.slice(0, -1)); // 'example.'
    else exact.add(p);
  }
  return (host) =>
    exact.has(host) || suffixes.some((s) => host.length > s.length && host.endsWith(s)) || prefixes.some((s) => host.length > s.length && host.startsWith(s));
}
