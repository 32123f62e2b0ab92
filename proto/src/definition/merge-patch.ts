/**
 * RFC 7396 JSON merge patch. Pure: the result shares nothing with its inputs (deep copies), so
 * callers may mutate it freely. Members are set with defineProperty so a `__proto__` key in the
 * JSON stays a plain member instead of changing the object's prototype.
 */
import { isPlainObject } from './field-path.js';

function setMember(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

function cloneJson(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(cloneJson);
  if (!isPlainObject(v)) return v;
  const out: Record<string, unknown> = {};
  for (const [k, val] of Object.entries(v)) setMember(out, k, cloneJson(val));
  return out;
}

export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return cloneJson(patch);
  const result: Record<string, unknown> = isPlainObject(target) ? (cloneJson(target) as Record<string, unknown>) : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else setMember(result, key, mergePatch(Object.hasOwn(result, key) ? result[key] : undefined, value));
  }
  return result;
}
