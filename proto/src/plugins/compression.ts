/**
 * compression: Janus's plugin has no options (`{"name": "compression", "enabled": true}`), and that
 * form is accepted as is. Added here:
 *
 * - `min_size` (bytes, default 1024): a response whose Content-Length is known and smaller is sent
 *   as it is (a streamed response of unknown length is compressed).
 * - `content_types` (JSON array or comma list): media types worth compressing, `type/subtype`, or
 *   with one `*` in the subtype (`text/*`, `application/*+json`), or `*` / `*\/*` for any. Compared
 *   case-insensitively with the response's Content-Type, parameters ignored. Default: text, JSON,
 *   JavaScript, XML and SVG (already compressed formats, images, video and archives are left alone).
 * - `encodings` (default `["br", "gzip"]`): the codings the gateway may use.
 */
import { z } from 'zod';
import { commaList, subsetOf } from './http-syntax.js';
import { deepFreeze, definePlugin } from './plugin.js';

export const COMPRESSION_ENCODINGS = ['br', 'gzip'] as const;
export type CompressionEncoding = (typeof COMPRESSION_ENCODINGS)[number];

export const DEFAULT_COMPRESSIBLE_TYPES = [
  'text/*',
  'application/json',
  'application/*+json',
  'application/javascript',
  'application/xml',
  'application/*+xml',
  'image/svg+xml',
];

const UINT32_MAX = 4_294_967_295;
const TOKEN = "[!#$%&'+\\-.^_`|~0-9a-z]";
/** `type/subtype` with at most one `*` in the subtype, or `*` for any. */
const MEDIA_RANGE = new RegExp(`^(?:\\*|\\*/\\*|${TOKEN}+/${TOKEN}*\\*?${TOKEN}*)$`);

/** One media range of a `content_types` list (compression, proxy_cache), lower-cased; `*` is stored as `*\/*`. */
export const contentTypeSchema = z
  .string()
  .transform((s) => s.trim().toLowerCase())
  .refine((s) => MEDIA_RANGE.test(s) && !s.endsWith('/'), 'must be a media type such as "application/json", "text/*" or "application/*+json"')
  .transform((s) => (s === '*' ? '*/*' : s));

const schema = z.object({
  min_size: z.int({ error: 'must be an integer number of bytes' }).min(0, 'must be at least 0').max(UINT32_MAX, `must be at most ${UINT32_MAX}`).default(1024),
  content_types: commaList(contentTypeSchema)
    .default(DEFAULT_COMPRESSIBLE_TYPES)
    .refine((t) => t.length > 0, 'must not be empty')
    .transform((t) => [...new Set(t)]),
  encodings: subsetOf(COMPRESSION_ENCODINGS, (s) => s.toLowerCase(), 'must be "br" or "gzip"'),
});

export type CompressionConfig = z.output<typeof schema>;

/** `application/*+json` → type 'application', prefix '', suffix '+json'. */
interface TypeWildcard {
  type: string;
  prefix: string;
  suffix: string;
}

/** A compiled `content_types` list (contentTypeSchema's output). */
export interface MediaRanges {
  anyType: boolean;
  exactTypes: ReadonlySet<string>;
  typeWildcards: readonly TypeWildcard[];
}

export interface CompiledCompression extends MediaRanges {
  minSize: number;
  br: boolean;
  gzip: boolean;
}

export function compileMediaRanges(types: readonly string[]): MediaRanges {
  const exactTypes = new Set<string>();
  const typeWildcards: TypeWildcard[] = [];
  for (const t of types) {
    if (t === '*/*') continue;
    const slash = t.indexOf('/');
    const subtype = t.slice(slash + 1);
    const star = subtype.indexOf('*');
    if (star === -1) exactTypes.add(t);
    else typeWildcards.push({ type: t.slice(0, slash), prefix: subtype.slice(0, star), suffix: subtype.slice(star + 1) });
  }
  return { anyType: types.includes('*/*'), exactTypes, typeWildcards };
}

function compile(c: CompressionConfig): CompiledCompression {
  return deepFreeze({
    minSize: c.min_size,
    ...compileMediaRanges(c.content_types),
    br: c.encodings.includes('br'),
    gzip: c.encodings.includes('gzip'),
  });
}

/** True when a Content-Type header value (parameters allowed, any case) is in `ranges` (compression: one to compress). */
export function mediaTypeListed(compression: MediaRanges, contentType: string): boolean {
  const semi = contentType.indexOf(';');
  const type = (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
  const slash = type.indexOf('/');
  if (slash <= 0 || slash === type.length - 1) return false;
  if (compression.anyType || compression.exactTypes.has(type)) return true;
  const major = type.slice(0, slash);
  const subtype = type.slice(slash + 1);
  return compression.typeWildcards.some(
    (w) => w.type === major && subtype.length >= w.prefix.length + w.suffix.length && subtype.startsWith(w.prefix) && subtype.endsWith(w.suffix),
  );
}

export const compressionPlugin = definePlugin({ schema, compile });
