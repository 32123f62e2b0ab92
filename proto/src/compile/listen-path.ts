/**
 * Compile a `listen_path` (SPEC §4) into a matcher over normalised request paths.
 *
 * Forms: `/foo/*` matches `/foo`, `/foo/` and `/foo/<anything>` (never `/foobar`); without `/*`
 * the path must match exactly. `{name}` matches one segment (`[^/]+`), `{name:<regex>}` matches a
 * segment against the regex, anchored. Matching is segment by segment, so a parameter's regex can
 * never reach across a `/` of the request path. Parameter regexes see the percent-decoded segment
 * and the captured value is the decoded one (the target substitution re-encodes it).
 */
import { GatehouseError } from '../errors.js';
import type { CompiledListenPath, ListenPathMatch } from './index.js';
import { normalizePercentEncoding } from './normalize-path.js';

const PARAM_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** One `/`-section of the listen_path: a literal, or a pattern holding one or more parameters. */
type Segment = { literal: string } | { pattern: RegExp; names: string[] };

type Token = { literal: string } | { param: string; regex: string | undefined };

function fail(field: string, message: string): never {
  throw new GatehouseError('VALIDATION_FAILED', `${field} ${message}`, { field });
}

/** Split a listen_path body into literal text and `{...}` parameters, braces balanced (`{id:[\da-f]{24}}`). */
function tokenize(body: string, field: string): Token[] {
  const tokens: Token[] = [];
  let literal = '';
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c === '}') fail(field, `has an unmatched } at position ${i}`);
    if (c === '*') fail(field, 'may contain * only as a final /*');
    if (c === '?' || c === '#') fail(field, 'must not contain ? or #');
    if (c !== '{') {
      literal += c;
      continue;
    }
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
    if (literal) tokens.push({ literal });
    literal = '';
    tokens.push({ param: name, regex });
    i = j - 1;
  }
  if (literal) tokens.push({ literal });
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
    t.literal.split('/').forEach((part, k) => {
      if (k > 0) sections.push([]);
      if (part) sections[sections.length - 1].push({ literal: part });
    });
  }
  sections.shift(); // the body starts with '/', so the first section is always empty
  const paramNames: string[] = [];
  const segments = sections.map((section): Segment => {
    if (section.every((t) => 'literal' in t)) {
      return { literal: normalizePercentEncoding(section.map((t) => ('literal' in t ? t.literal : '')).join('')) };
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
    return { pattern: compileSegmentPattern(section, field), names };
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
    return new RegExp(source + '$');
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
    if (!('literal' in s)) return;
    const trailingSlash = !wildcard && i === segments.length - 1;
    if (s.literal === '' && !trailingSlash) fail(field, 'must not contain empty segments (//)');
    if (s.literal === '.' || s.literal === '..') fail(field, 'must not contain . or .. segments');
  });
  const first = tokens[0];
  const literalPrefix = normalizePercentEncoding(
    first === undefined ? '' : 'literal' in first ? first.literal : '',
  );

  let match: (path: string) => ListenPathMatch | null;
  if (paramNames.length === 0) {
    const exact = '/' + segments.map((s) => ('literal' in s ? s.literal : '')).join('/');
    match = wildcard
      ? (path) =>
          exact === '/' || path === literalPrefix || path.startsWith(literalPrefix + '/')
            ? { params: {}, matched: exact === '/' ? '' : literalPrefix }
            : null
      : (path) => (path === exact ? { params: {}, matched: path } : null);
  } else {
    match = (path) => matchSegments(segments, wildcard, path);
  }
  return { source, literalPrefix, wildcard, paramNames, match };
}

function matchSegments(segments: Segment[], wildcard: boolean, path: string): ListenPathMatch | null {
  const parts = path.split('/');
  parts.shift();
  if (wildcard ? parts.length < segments.length : parts.length !== segments.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i];
    const part = parts[i];
    if ('literal' in seg) {
      if (part !== seg.literal) return null;
      continue;
    }
    const m = seg.pattern.exec(safeDecode(part));
    if (!m?.groups) return null;
    seg.names.forEach((name, k) => {
      params[name] = m.groups![`gh${k}`] ?? '';
    });
  }
  const matched = '/' + parts.slice(0, segments.length).join('/');
  return { params, matched };
}
