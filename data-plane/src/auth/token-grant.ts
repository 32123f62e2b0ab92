/**
 * What a verified token grants (docs/oauth2.md "OAuth 2.0"): its scopes, and the claims the oauth2 plugin may send upstream
 * (claims_to_headers). Made once per verification from a JWT's claims or an RFC 7662 response, and cached with the
 * verdict: the route's plugin judges scopes and picks claims per request, so a changed plugin config never reuses
 * a verdict made under the old one (the caches hold no route's decision).
 *
 * | source                      | scopes                                                   |
 * |-----------------------------|----------------------------------------------------------|
 * | `scope`, string             | space-separated (RFC 6749 §3.3, RFC 8693 §4.2, RFC 7662) |
 * | `scp`, string               | space-separated (Entra ID)                               |
 * | `scope` or `scp`, array     | its string items (Okta's `scp`)                          |
 * Both members count when both are present.
 *
 * Claims kept: top-level strings, numbers and booleans (as JSON writes them) whose text is printable ASCII
 * (space to `~`, so no CR, LF, NUL or other control character and nothing a header cannot carry as is) and at most
 * MAX_CLAIM_VALUE characters. Anything else (objects, arrays, null, longer or other text) is not kept: its header is
 * omitted, never sent truncated or re-encoded.
 */

export interface TokenGrant {
  readonly scopes: ReadonlySet<string>;
  readonly claims: ReadonlyMap<string, string>;
  /** Characters held (claim names and values, scopes): what caching it costs. */
  readonly size: number;
}

export const MAX_CLAIM_VALUE = 1024;
const HEADER_SAFE = /^[\x20-\x7e]*$/;

/** The grant of a strategy that sees no claims (storage). */
export const EMPTY_GRANT: TokenGrant = Object.freeze({ scopes: new Set<string>(), claims: new Map<string, string>(), size: 0 });

function addScopes(into: Set<string>, value: unknown): void {
  const items = typeof value === 'string' ? value.split(' ') : Array.isArray(value) ? value : [];
  for (const item of items) if (typeof item === 'string' && item !== '') into.add(item);
}

/** A claim's header text, or undefined when it has none (see the file comment). */
export function claimText(value: unknown): string | undefined {
  const text = typeof value === 'string' ? value : typeof value === 'number' || typeof value === 'boolean' ? String(value) : undefined;
  return text !== undefined && text.length <= MAX_CLAIM_VALUE && HEADER_SAFE.test(text) ? text : undefined;
}

export function grantOf(claims: Readonly<Record<string, unknown>>): TokenGrant {
  const scopes = new Set<string>();
  addScopes(scopes, claims.scope);
  addScopes(scopes, claims.scp);
  const kept = new Map<string, string>();
  let size = 0;
  for (const scope of scopes) size += scope.length;
  for (const [name, value] of Object.entries(claims)) {
    const text = claimText(value);
    if (text === undefined) continue;
    kept.set(name, text);
    size += name.length + text.length;
  }
  return { scopes, claims: kept, size };
}

/** RFC 7519 §4.1.3: `aud` is one string or an array of them; true when it holds one of `audiences`. */
export function audienceMatches(aud: unknown, audiences: readonly string[]): boolean {
  const held = typeof aud === 'string' ? [aud] : Array.isArray(aud) ? aud : [];
  return held.some((a) => typeof a === 'string' && audiences.includes(a));
}
