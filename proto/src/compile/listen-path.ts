/**
 * Compile a `listen_path` (docs/proxy.md "Proxy behaviour") into a matcher over normalised request paths.
 *
 * Forms: `/foo/*` matches `/foo`, `/foo/` and `/foo/<anything>` (never `/foobar`); without `/*`
 * the path must match exactly. `{name}` matches one segment (`[^/]+`), `{name:<regex>}` matches a
 * segment against the regex, anchored. Matching is segment by segment, so a parameter's regex can
 * never reach across a `/` of the request path. Parameter regexes see the percent-decoded segment
 * and the captured value is the decoded one (the target substitution re-encodes it).
 */
import { fieldError } from '../definition/field-path.js';
import { EMPTY_LIST } from '../definition/proxy-schema.js';
import type { CompiledListenPath, ListenPathMatch } from './index.js';
import { normalizePercentEncoding } from './normalize-path.js';

const PARAM_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * One `/`-section of the listen_path: a literal; a single parameter (`{id}`, or `{id:re}` with
 * `test` its anchored regex), the common case, whose value is the whole decoded segment; or a
 * pattern mixing parameters with literal text (`v{ver}`, `{y}-{m}`), read from named groups.
 */
type Segment =
  | { kind: 'literal'; literal: string }
  | { kind: 'param'; name: string; test: RegExp | null }
  | { kind: 'pattern'; pattern: RegExp; names: string[]; groups: string[] };

type Token = { literal: string } | { param: string; regex: string | undefined };

function fail(field: string, message: string): never {
  throw fieldError(field, message);
}

/** Split a listen_path body into literal text and `{...}` parameters, braces balanced (`{id:[\da-f]{24}}`). */
function tokenize(body: string, field: string): Token[] {
  const tokens: Token[] = [];
  // The literal text since the last parameter is sliced once (body.slice(literalStart, i)), not grown a
  // character at a time, which would allocate a string per character of every listen path.
  let literalStart = 0;
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c === '}') fail(field, `has an unmatched } at position ${i}`);
    if (c === '*') fail(field, 'may contain * only as a final /*');
    if (c === '?' || c === '#') fail(field, 'must not contain ? or #');
    if (c !== '{') continue;
    let depth = 1;
    let j = i + 1;
    for (; j < body.length && depth > 0; j++) {
      if (body[j] === '\\') j++;
      else if (body[j] === '{') depth++;
      else if (body[j] === '}') depth--;
    }
    if (depth > 0) fail(field, `has an unclosed { at position ${i}`);
    const inner = body.slice(i + 1, j - 1);
    const colon = inner.indexOf(':');
    const name = colon < 0 ? inner : inner.slice(0, colon);
    const regex = colon < 0 ? undefined : inner.slice(colon + 1);
    if (!PARAM_NAME.test(name)) fail(field, `has an invalid parameter name "${name}"`);
    if (regex === '') fail(field, `parameter "${name}" has an empty regex`);
    if (literalStart < i) tokens.push({ literal: body.slice(literalStart, i) });
    tokens.push({ param: name, regex });
    i = j - 1;
    literalStart = j;
  }
  if (literalStart < body.length) tokens.push({ literal: body.slice(literalStart) });
  return tokens;
}

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Group tokens into `/`-sections; a literal token may span several sections. */
function toSegments(tokens: Token[], field: string): { segments: Segment[]; paramNames: string[] } {
  const sections: Token[][] = [[]];
  for (const t of tokens) {
    if (!('literal' in t)) {
      sections[sections.length - 1].push(t);
      continue;
    }
    const parts = t.literal.split('/');
    for (let k = 0; k < parts.length; k++) {
      if (k > 0) sections.push([]);
      if (parts[k]) sections[sections.length - 1].push({ literal: parts[k] });
    }
  }
  sections.shift(); // the body starts with '/', so the first section is always empty
  const paramNames: string[] = [];
  const segments = sections.map((section): Segment => {
    // tokenize never puts two literals side by side, so a section without parameters has one literal or none.
    if (section.length <= 1 && (section.length === 0 || 'literal' in section[0])) {
      return { kind: 'literal', literal: normalizePercentEncoding(section.length === 0 ? '' : (section[0] as { literal: string }).literal) };
    }
    const names: string[] = [];
    for (const t of section) {
      if ('literal' in t) continue;
      if (paramNames.includes(t.param)) fail(field, `defines parameter "${t.param}" twice`);
      paramNames.push(t.param);
      names.push(t.param);
      if (t.regex === undefined) continue;
      try {
        new RegExp(`^(?:${t.regex})$`);
      } catch (err) {
        fail(field, `parameter "${t.param}" has an invalid regex: ${(err as Error).message}`);
      }
    }
    const pattern = compileSegmentPattern(section, field);
    const only = section.length === 1 ? section[0] : undefined;
    if (only !== undefined && !('literal' in only)) {
      // The same regex as a pattern's (its group numbering is what a user backreference sees), only tested.
      return { kind: 'param', name: only.param, test: only.regex === undefined ? null : pattern };
    }
    return { kind: 'pattern', pattern, names, groups: names.map((_, k) => `gh${k}`) };
  });
  return { segments, paramNames };
}

/**
 * One anchored regex per segment. Values are read from internal named groups (`gh0`, `gh1`…, by
 * position in `names`), so capturing groups inside a user regex cannot shift them.
 */
function compileSegmentPattern(section: Token[], field: string): RegExp {
  let source = '^';
  let k = 0;
  for (const t of section) {
    if ('literal' in t) source += escapeRegex(safeDecode(t.literal));
    else source += `(?<gh${k++}>${t.regex === undefined ? '[^/]+' : `(?:${t.regex})`})`;
  }
  try {
    return new RegExp(`${source}$`);
  } catch (err) {
    return fail(field, `has an invalid parameter regex: ${(err as Error).message}`);
  }
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/**
 * Compile `listen_path`; `field` names it in error messages (`proxy.listen_path`,
 * `oauth_endpoints.token.listen_path`). Throws GatehouseError VALIDATION_FAILED.
 */
export function compileListenPath(source: string, field = 'proxy.listen_path'): CompiledListenPath {
  if (typeof source !== 'string' || source === '') fail(field, 'is required');
  if (!source.startsWith('/')) fail(field, 'must start with /');
  const wildcard = source.endsWith('/*');
  const body = wildcard ? source.slice(0, -2) : source;
  const tokens = tokenize(body, field);
  const { segments, paramNames } = toSegments(tokens, field);
  segments.forEach((s, i) => {
    if (s.kind !== 'literal') return;
    const trailingSlash = !wildcard && i === segments.length - 1;
    if (s.literal === '' && !trailingSlash) fail(field, 'must not contain empty segments (//)');
    if (s.literal === '.' || s.literal === '..') fail(field, 'must not contain . or .. segments');
  });
  const first = tokens[0];
  const literalPrefix = normalizePercentEncoding(first === undefined ? '' : 'literal' in first ? first.literal : '');
  const literals = segments.map((s) => (s.kind === 'literal' ? s.literal : null));
  const names = paramNames.length === 0 ? EMPTY_LIST : paramNames.slice();
  return new ListenPath(source, literalPrefix, wildcard, names, literals, paramNames.length === 0 ? null : segments);
}

/**
 * A listen path's matcher as an object of its own, not a closure: a data plane holds one per route, and a
 * closure with its context would cost more memory per API. A literal path compares strings; one
 * with parameters walks its parsed segments. Lists grown by push are kept as exact copies (`slice`): a
 * push-grown array has room for 17 items.
 */
class ListenPath implements CompiledListenPath {
  /** A literal path without `/*`: the one path it matches (literalPrefix itself when equal, so no second string); else unused. */
  private readonly exact: string;

  constructor(
    readonly source: string,
    readonly literalPrefix: string,
    readonly wildcard: boolean,
    readonly paramNames: string[],
    readonly segments: readonly (string | null)[],
    /** null for a literal path. */
    private readonly parsed: readonly Segment[] | null,
  ) {
    const exact = parsed === null && !wildcard ? `/${segments.join('/')}` : literalPrefix;
    this.exact = exact === literalPrefix ? literalPrefix : exact;
  }

  match(path: string): ListenPathMatch | null {
    if (this.parsed !== null) return matchSegments(this.parsed, this.wildcard, path);
    if (!this.wildcard) return path === this.exact ? { params: {}, matched: path } : null;
    // `/foo/*`: `/foo` itself or `/foo/…`, never `/foobar`; `/*`: every path.
    const prefix = this.literalPrefix;
    if (prefix === '') return { params: {}, matched: '' };
    const matches = path.length === prefix.length ? path === prefix : path.charCodeAt(prefix.length) === 0x2f && path.startsWith(prefix);
    return matches ? { params: {}, matched: prefix } : null;
  }
}

/**
 * Walks the request path's segments with indexOf (no split, no per-segment strings for literals).
 * `path` is a normalised request path, so it starts with `/`; anything else matches nothing.
 */
function matchSegments(segments: readonly Segment[], wildcard: boolean, path: string): ListenPathMatch | null {
  if (path.charCodeAt(0) !== 0x2f) return null;
  const params: Record<string, string> = {};
  let start = 1; // first character of the current segment
  let end = 0; // the '/' or end of path after the current segment
  for (let i = 0; i < segments.length; i++) {
    if (start > path.length) return null; // the path has fewer segments
    end = path.indexOf('/', start);
    if (end < 0) end = path.length;
    const seg = segments[i];
    if (seg.kind === 'literal') {
      if (end - start !== seg.literal.length || !path.startsWith(seg.literal, start)) return null;
    } else {
      const part = path.slice(start, end);
      const value = part.includes('%') ? safeDecode(part) : part;
      if (seg.kind === 'param') {
        // `[^/]+` unless a regex is given: a decoded %2F counts as a '/'.
        if (seg.test === null ? value === '' || value.includes('/') : !seg.test.test(value)) return null;
        params[seg.name] = value;
      } else {
        const m = seg.pattern.exec(value);
        if (!m?.groups) return null;
        for (let k = 0; k < seg.names.length; k++) params[seg.names[k]] = m.groups[seg.groups[k]] ?? '';
      }
    }
    start = end + 1;
  }
  if (!wildcard && end !== path.length) return null; // the path has more segments
  return { params, matched: path.slice(0, end) };
}
