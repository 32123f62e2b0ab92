/**
 * Turns the first zod issue into our one error: GatehouseError('VALIDATION_FAILED') whose message
 * starts with the dotted field path (`proxy.upstreams.targets[0].target is required`).
 * Schemas carry our wording as their messages ("is required", "must not be empty", or
 * ": unknown plugin ..." when the text follows the path without a space).
 */
import type { z } from 'zod';
import { GatehouseError } from '../errors.js';

export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else out += out === '' ? String(seg) : `.${String(seg)}`;
  }
  return out;
}

/** The one wording of a field error, for the definition and compile stages alike. */
export function fieldError(field: string, message: string): GatehouseError {
  const text = field === '' ? message : message.startsWith(':') ? `${field}${message}` : `${field} ${message}`;
  return new GatehouseError('VALIDATION_FAILED', text, { field: field === '' ? undefined : field });
}

export function validationError(path: readonly PropertyKey[], message: string): GatehouseError {
  return fieldError(formatPath(path), message);
}

const ARTICLE: Record<string, string> = { object: 'an object', record: 'an object', array: 'an array', int: 'an integer' };

/** Wording for issues a schema left without its own message. */
function defaultMessage(iss: z.core.$ZodRawIssue): string | undefined {
  switch (iss.code) {
    case 'invalid_type':
      if (iss.input === undefined) return 'is required';
      return `must be ${ARTICLE[iss.expected] ?? `a ${iss.expected}`}`;
    case 'too_small':
      return iss.origin === 'array' || iss.origin === 'string' ? 'must not be empty' : `must be at least ${iss.minimum}`;
    case 'too_big':
      return iss.origin === 'array' || iss.origin === 'string' ? 'is too long' : `must be at most ${iss.maximum}`;
    default:
      return undefined;
  }
}

export type Checked<T> = { ok: true; data: T } | { ok: false; error: GatehouseError; path: PropertyKey[] };

/** Parse with `schema`; a failure is the first issue as a VALIDATION_FAILED naming `base` + its path. */
/** One options object for every parse (a data plane parses every definition of a snapshot). */
const PARSE_OPTIONS = { error: defaultMessage };

export function check<S extends z.ZodType>(schema: S, raw: unknown, base: readonly PropertyKey[] = []): Checked<z.output<S>> {
  const result = schema.safeParse(raw, PARSE_OPTIONS);
  if (result.success) return { ok: true, data: result.data };
  const issue = result.error.issues[0];
  const path = [...base, ...issue.path];
  return { ok: false, error: validationError(path, issue.message), path };
}

export function parseOrThrow<S extends z.ZodType>(schema: S, raw: unknown, base: readonly PropertyKey[] = []): z.output<S> {
  const result = check(schema, raw, base);
  if (!result.ok) throw result.error;
  return result.data;
}

/** True for a JSON object (not null, not an array). */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Object members set to null are treated as absent: Go clients (Janus-era seeds) serialise nil
 * slices and pointers as null. Null array elements stay, and fail validation. A `__proto__`
 * member (possible in JSON.parse output) is never a field of ours: dropped, so it cannot become
 * the copy's prototype and feed it inherited fields. A value with neither is returned as it is
 * (no copy): the schemas that read it next build their own output, and a data plane's snapshot
 * (50,000 definitions, none with a null) then allocates nothing here.
 */
export function dropNulls(v: unknown): unknown {
  return walk(v, MAX_NESTING_DEPTH) ? withoutNulls(v) : v;
}

// The walks allocate no pair or tuple per member (Object.entries, [value, depth]): a data plane runs
// them over every definition of a snapshot, and they were 4% of a 50,000-API cold sync's CPU profile
// (self time), 3% since.
function withoutNulls(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(withoutNulls);
  if (!isPlainObject(v)) return v;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v)) {
    const val = v[k];
    if (val !== null && k !== '__proto__') out[k] = withoutNulls(val);
  }
  return out;
}

/**
 * No definition nests deeper than a dozen levels. Every later pass (null stripping, merge patch,
 * the schema) recurses, so a body 5,000 levels deep would exhaust the stack there and surface as a
 * 500 (found by test/e2e/admin-fuzz.test.ts); this walk is iterative and runs first.
 */
export const MAX_NESTING_DEPTH = 32;

export function assertNestingDepth(value: unknown, max = MAX_NESTING_DEPTH): void {
  walk(value, max);
}

/**
 * The walk's stacks, shared by every call (it is synchronous and never re-entered, and leaves them
 * empty): two arrays grown per definition were 22 MB of what a 50,000-API sync allocated.
 */
const values: object[] = [];
const depths: number[] = [];

/**
 * One iterative pass for both: throws when `value` nests deeper than `max`; true when dropNulls has
 * something to drop (an object member that is null or `__proto__`).
 */
function walk(value: unknown, max: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  try {
    return walkFrom(value, max);
  } finally {
    values.length = 0;
    depths.length = 0;
  }
}

function walkFrom(value: object, max: number): boolean {
  let dropped = false;
  values.push(value);
  depths.push(0);
  while (values.length > 0) {
    const v = values.pop()!;
    const depth = depths.pop()!;
    if (depth >= max) throw fieldError('', `body nests deeper than ${max} levels`);
    if (Array.isArray(v)) {
      // Null elements stay (and fail validation): nothing to drop.
      for (let i = 0; i < v.length; i++) {
        const child: unknown = v[i];
        if (typeof child !== 'object' || child === null) continue;
        values.push(child);
        depths.push(depth + 1);
      }
      continue;
    }
    // for…in, not Object.keys: no array of keys per object (26 MB of a 50,000-API snapshot's 1 GB allocated).
    for (const key in v) {
      if (!Object.hasOwn(v, key)) continue;
      const child = (v as Record<string, unknown>)[key];
      if (child === null || key === '__proto__') dropped = true;
      if (typeof child !== 'object' || child === null) continue;
      values.push(child);
      depths.push(depth + 1);
    }
  }
  return dropped;
}
