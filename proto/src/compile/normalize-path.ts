/**
 * Request-path normalisation done before matching. The gateway matches AND forwards the normalised
 * path, so what an upstream receives is exactly what the routing decision was made on: a request
 * like `/public/../private/x` or `/public/%2e%2e/private/x` cannot pass a `/public/*` route (or
 * dodge an oauth2-protected `/private/*` one) and then be resolved differently upstream.
 */

const HEX = /^[0-9A-Fa-f]{2}$/;
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

/**
 * RFC 3986 §6.2.2.1–2: percent-encoded unreserved characters are decoded (`%7E` → `~`,
 * `%2e` → `.`) and the hex digits of the remaining escapes upper-cased (`%2F` stays encoded).
 * A `%` that starts no valid escape becomes `%25`, so decoding can never assemble a new escape
 * (`%%32%65` must not turn into `%2e` for a later decoder to read as a dot).
 */
export function normalizePercentEncoding(s: string): string {
  if (!s.includes('%')) return s;
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    const hex = s.slice(i + 1, i + 3);
    if (c === '%' && HEX.test(hex)) {
      const ch = String.fromCharCode(parseInt(hex, 16));
      out += UNRESERVED.test(ch) ? ch : `%${hex.toUpperCase()}`;
      i += 2;
    } else {
      out += c === '%' ? '%25' : c;
    }
  }
  return out;
}

/**
 * RFC 3986 §5.2.4 remove_dot_segments over a path that starts with `/`, done on whole segments:
 * `.` is dropped, `..` drops the previous segment (never above the root); a trailing `.`/`..` keeps
 * the trailing slash (`/a/b/..` → `/a/`).
 */
function removeDotSegments(path: string): string {
  const input = path.split('/').slice(1);
  const out: string[] = [];
  input.forEach((seg, i) => {
    const last = i === input.length - 1;
    if (seg === '.' || seg === '..') {
      if (seg === '..') out.pop();
      if (last) out.push('');
    } else {
      out.push(seg);
    }
  });
  return `/${out.join('/')}`;
}

/**
 * The common case, checked without allocating: a path that starts with `/` and holds no `%`
 * (nothing to decode), no `//` (nothing to collapse) and no `/.` (no segment can be `.` or `..`)
 * is already normal.
 */
function isNormal(path: string): boolean {
  return path.charCodeAt(0) === 0x2f && !path.includes('%') && !path.includes('//') && !path.includes('/.');
}

/**
 * Normalise a raw request path (no query string): percent-encoding normalised (so `%2e%2e` is a dot
 * segment), runs of `/` collapsed to one (upstreams commonly do the same, and `//private` must not
 * miss a `/private/*` route), dot segments removed. Always returns a path starting with `/`.
 * Idempotent: normalizePath(normalizePath(p)) === normalizePath(p).
 */
export function normalizePath(rawPath: string): string {
  if (isNormal(rawPath)) return rawPath;
  let p = normalizePercentEncoding(rawPath);
  if (!p.startsWith('/')) p = `/${p}`;
  p = p.replace(/\/{2,}/g, '/');
  return removeDotSegments(p);
}

/** A segment that is `.` or `..` followed by path parameters (`..;x`): Tomcat and Jetty drop the parameters, then climb. */
const DOT_WITH_PARAMETERS = /(?:^|\/)\.\.?(?:;|%3B)/i;
/** `%2F` and `%5C` (the normalised form upper-cases escapes; the flag keeps this right on any input). */
const ENCODED_SLASH = /%2F|%5C/i;
/** A `.`/`..` segment that appears once an upstream decodes the slashes around it (`/a%2F..%2Fb`). */
const DOT_BETWEEN_ENCODED_SLASHES = /(?:^|\/|%2F|%5C)\.\.?(?=$|\/|%2F|%5C)/i;

/**
 * Why a normalised path would be read differently by some upstream than the routing decision read it, or
 * null: a raw `\` (a separator to IIS, Windows servers and WHATWG URL parsers), a dot segment with parameters
 * (`/a/..;/b`, a climb to Tomcat and Jetty), or a dot segment that an upstream decoding `%2F`/`%5C` would see
 * (`/a%2F..%2Fb`). These are refused on every route: no client needs them (a backslash or semicolon that is data
 * can be sent encoded). Encoded slashes alone are the caller's to judge (hasEncodedSlash), per API.
 */
export function ambiguousPathForm(path: string): string | null {
  if (path.includes('\\')) return 'a backslash';
  if (!path.includes(';') && !path.includes('%')) return null;
  if (DOT_WITH_PARAMETERS.test(path)) return 'a dot segment with parameters';
  if (DOT_BETWEEN_ENCODED_SLASHES.test(path) && ENCODED_SLASH.test(path)) return 'a dot segment between encoded slashes';
  return null;
}

/** Whether a path holds `%2F` or `%5C`, which upstreams that decode them before routing read as separators. */
export function hasEncodedSlash(path: string): boolean {
  return path.includes('%') && ENCODED_SLASH.test(path);
}

/** The proxy's AMBIGUOUS_PATH message for a normalised path before routing (a form no API allows), or null. */
export function refusedBeforeRouting(path: string): string | null {
  const form = ambiguousPathForm(path);
  return form && `request path holds ${form}`;
}

/** The proxy's AMBIGUOUS_PATH message once the route matched: encoded slashes on an API that does not allow them, or null. */
export function refusedForApi(path: string, allowEncodedSlashes: boolean | undefined): string | null {
  return !allowEncodedSlashes && hasEncodedSlash(path) ? 'request path holds an encoded slash (%2F, %5C) and its API does not allow them' : null;
}
