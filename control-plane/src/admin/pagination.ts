/**
 * Pages of a collection listing (GET /apis, /oauth/servers, /credentials/…): `?limit=N` (1–1000) returns the
 * first N items in name order, `&after=<name>` those after that name, and a `Link: <…>; rel="next"` header
 * (RFC 8288) while more remain. Without either parameter the listing is whole, as it always was. A cursor is a
 * name rather than an offset, so a write between two pages neither repeats nor skips an item that stays.
 */
import { GatehouseError } from '#proto/errors';

export const MAX_PAGE_SIZE = 1000;
const DEFAULT_PAGE_SIZE = 100;

export interface PageRequest {
  limit: number;
  after: string | undefined;
}

/** The page asked for by a query, null when none is (the whole list); VALIDATION_FAILED naming the parameter. */
export function pageRequestOf(query: Record<string, unknown>): PageRequest | null {
  const { limit, after } = query;
  if (limit === undefined && after === undefined) return null;
  if (after !== undefined && typeof after !== 'string') throw new GatehouseError('VALIDATION_FAILED', 'after must be given once', { field: 'after' });
  if (limit === undefined) return { limit: DEFAULT_PAGE_SIZE, after };
  const n = typeof limit === 'string' && /^\d{1,4}$/.test(limit) ? Number(limit) : NaN;
  if (!(n >= 1 && n <= MAX_PAGE_SIZE))
    throw new GatehouseError('VALIDATION_FAILED', `limit must be a whole number from 1 to ${MAX_PAGE_SIZE}`, { field: 'limit' });
  return { limit: n, after };
}

/**
 * Lists sorted by name, kept per list: a store's list is replaced, never changed in place, by a write, so one
 * sort serves every page read until the next write (50,000 names sort in tens of milliseconds).
 */
const sortedLists = new WeakMap<readonly unknown[], readonly unknown[]>();

/** The page of `list` (names by `nameOf`, compared as code units) and the cursor of the next one, null at the end. */
export function pageOf<T>(list: readonly T[], nameOf: (item: T) => string, page: PageRequest): { items: T[]; next: string | null } {
  let sorted = sortedLists.get(list) as readonly T[] | undefined;
  // (The length check guards against a list changed in place after all.)
  if (!sorted || sorted.length !== list.length) {
    sorted = [...list].sort((a, b) => (nameOf(a) < nameOf(b) ? -1 : nameOf(a) > nameOf(b) ? 1 : 0));
    sortedLists.set(list, sorted);
  }
  let start = 0;
  if (page.after !== undefined) {
    // First name after the cursor, by binary search.
    let high = sorted.length;
    while (start < high) {
      const mid = (start + high) >>> 1;
      if (nameOf(sorted[mid]!) <= page.after) start = mid + 1;
      else high = mid;
    }
  }
  const items = sorted.slice(start, start + page.limit);
  const more = start + page.limit < sorted.length;
  return { items, next: more ? nameOf(items[items.length - 1]!) : null };
}

/** The `Link` value of the next page of `path`. */
export function nextLink(path: string, page: PageRequest, next: string): string {
  return `<${path}?limit=${page.limit}&after=${encodeURIComponent(next)}>; rel="next"`;
}
