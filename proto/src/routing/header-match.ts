/**
 * Header conditions (proxy.match_headers, docs/proxy.md "Proxy behaviour" Matching). The request's headers are
 * node's object: names lower-cased, a header sent several times as its values joined with ", " (RFC 9110
 * §5.3; Cookie with "; ", a few such as User-Agent reduced to the first one, Set-Cookie an array). A
 * condition holds when a listed value equals the whole field value or one of its comma-separated
 * elements, spaces and tabs around it ignored: `X-Canary: true` sent twice ("true, true") and
 * `Accept-Version: v1, v2` both hold for a value `true` and `v2` respectively. Nothing is allocated:
 * a lookup runs this for every entry with header conditions that it tries.
 */
import type { HeaderCondition } from '../compile/index.js';
import type { RequestHeaders } from './index.js';

const isOws = (c: number): boolean => c === 0x20 || c === 0x09;

/** Whether `values` holds `field` whole or one of its comma-separated elements. */
function fieldHolds(field: string, values: readonly string[]): boolean {
  for (let v = 0; v < values.length; v++) if (values[v] === field) return true;
  if (field.indexOf(',') < 0) return false;
  for (let start = 0; start <= field.length; ) {
    let end = field.indexOf(',', start);
    if (end < 0) end = field.length;
    let s = start;
    let e = end;
    while (s < e && isOws(field.charCodeAt(s))) s++;
    while (e > s && isOws(field.charCodeAt(e - 1))) e--;
    for (let v = 0; v < values.length; v++) if (values[v].length === e - s && field.startsWith(values[v], s)) return true;
    start = end + 1;
  }
  return false;
}

/** The request's header `name` (lower case) as routing reads it; undefined when absent. */
export function headerValue(headers: RequestHeaders | undefined, name: string): string | readonly string[] | undefined {
  const value = headers?.[name];
  // A name such as `constructor` reads the object's prototype when the request lacks it: not a header.
  return typeof value === 'string' || Array.isArray(value) ? value : undefined;
}

export function headerHolds(condition: HeaderCondition, headers: RequestHeaders | undefined): boolean {
  const value = headerValue(headers, condition.name);
  if (typeof value === 'string') return fieldHolds(value, condition.values);
  return value?.some((field) => fieldHolds(field, condition.values)) ?? false;
}

/** Every condition holds. */
export function headersHold(conditions: readonly HeaderCondition[], headers: RequestHeaders | undefined): boolean {
  for (let i = 0; i < conditions.length; i++) if (!headerHolds(conditions[i], headers)) return false;
  return true;
}
