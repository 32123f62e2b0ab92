/**
 * The configuration shared by request_transformer and response_transformer (Janus format):
 * `add`, `append`, `replace` each with `headers` (and, for requests, `querystring`) as
 * `{name: value}` objects; `remove` with lists of names (Janus's `{name: ""}` objects are accepted
 * too and stored as lists). Applied in Janus's order: remove → replace → add → append.
 *
 * Hop-by-hop headers and those the gateway owns (Host, X-Forwarded-*, X-Request-Id,
 * Content-Length) can never be set or removed: such a config is refused, naming the header.
 */
import { z } from 'zod';
import { isPlainObject } from '../definition/field-path.js';
import { headerNameSchema, headerValueSchema, reservedHeaderReason } from './http-syntax.js';

const RESERVED_SUFFIX = 'and cannot be changed by a transformer';

function checkHeaderName(name: string, ctx: z.RefinementCtx, path: PropertyKey[]): void {
  const parsed = headerNameSchema.safeParse(name);
  const reason = parsed.success ? reservedHeaderReason(name) : 'is not a valid header name';
  if (reason) ctx.addIssue({ code: 'custom', path, message: parsed.success ? `${reason} ${RESERVED_SUFFIX}` : reason });
}

const headerMapSchema = z
  .record(z.string(), headerValueSchema)
  .superRefine((map, ctx) => {
    for (const name of Object.keys(map)) checkHeaderName(name, ctx, [name]);
  })
  .default({});

const queryMapSchema = z
  .record(z.string(), z.string())
  .superRefine((map, ctx) => {
    if ('' in map) ctx.addIssue({ code: 'custom', path: [], message: ': a parameter name must not be empty' });
  })
  .default({});

/** A list of names, or Janus's `{name: ""}` object (its keys). */
const nameList = <T extends z.ZodType<string>>(item: T) => z.preprocess((v) => (isPlainObject(v) ? Object.keys(v) : v), z.array(item)).default([]);

const removedHeaderSchema = z.string().superRefine((name, ctx) => checkHeaderName(name, ctx, []));
const removedParamSchema = z.string().min(1, 'must not be empty');

const requestSection = z.object({ headers: headerMapSchema, querystring: queryMapSchema }).prefault({});
const responseSection = z.object({ headers: headerMapSchema }).prefault({});

export const requestTransformerSchema = z.object({
  add: requestSection,
  append: requestSection,
  replace: requestSection,
  remove: z.object({ headers: nameList(removedHeaderSchema), querystring: nameList(removedParamSchema) }).prefault({}),
});

export const responseTransformerSchema = z.object({
  add: responseSection,
  append: responseSection,
  replace: responseSection,
  remove: z.object({ headers: nameList(removedHeaderSchema) }).prefault({}),
});

export interface HeaderEntry {
  /** Lower-cased, for comparisons. */
  lower: string;
  /** As configured, for the upstream request line. */
  name: string;
  value: string;
}

export interface CompiledHeaderEdits {
  /** Lower-cased names. */
  remove: ReadonlySet<string>;
  replace: readonly HeaderEntry[];
  add: readonly HeaderEntry[];
  append: readonly HeaderEntry[];
}

export interface QueryEntry {
  /** Decoded name, compared with the decoded names of the request. */
  name: string;
  /** `name=value`, percent-encoded once here. */
  pair: string;
}

export interface CompiledQueryEdits {
  remove: ReadonlySet<string>;
  replace: readonly QueryEntry[];
  add: readonly QueryEntry[];
  append: readonly QueryEntry[];
}

const headerEntries = (map: Record<string, string>): HeaderEntry[] => Object.entries(map).map(([name, value]) => ({ lower: name.toLowerCase(), name, value }));

const queryEntries = (map: Record<string, string>): QueryEntry[] =>
  Object.entries(map).map(([name, value]) => ({ name, pair: `${encodeURIComponent(name)}=${encodeURIComponent(value)}` }));

type Section<T> = { add: T; append: T; replace: T };

/** null when nothing is configured, so the runtime skips the work. */
export function compileHeaderEdits(c: Section<{ headers: Record<string, string> }> & { remove: { headers: string[] } }): CompiledHeaderEdits | null {
  const edits = {
    remove: new Set(c.remove.headers.map((h) => h.toLowerCase())),
    replace: headerEntries(c.replace.headers),
    add: headerEntries(c.add.headers),
    append: headerEntries(c.append.headers),
  };
  return edits.remove.size + edits.replace.length + edits.add.length + edits.append.length === 0 ? null : edits;
}

export function compileQueryEdits(c: Section<{ querystring: Record<string, string> }> & { remove: { querystring: string[] } }): CompiledQueryEdits | null {
  const edits = {
    remove: new Set(c.remove.querystring),
    replace: queryEntries(c.replace.querystring),
    add: queryEntries(c.add.querystring),
    append: queryEntries(c.append.querystring),
  };
  return edits.remove.size + edits.replace.length + edits.add.length + edits.append.length === 0 ? null : edits;
}
