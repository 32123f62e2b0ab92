import fc from 'fast-check';
import { MAX_PAGE_SIZE, nextLink, pageOf, pageRequestOf } from './pagination.js';

const named = (names: string[]) => names.map((name) => ({ name }));
const nameOf = (item: { name: string }) => item.name;

describe('pageRequestOf', () => {
  test.each([
    [{}, null],
    [{ limit: '5' }, { limit: 5, after: undefined }],
    [
      { limit: '1000', after: 'b' },
      { limit: 1000, after: 'b' },
    ],
    [{ after: 'b' }, { limit: 100, after: 'b' }],
    [{ after: '' }, { limit: 100, after: '' }],
  ])('%j → %j', (query, expected) => {
    expect(pageRequestOf(query)).toEqual(expected);
  });

  test.each([[{ limit: '0' }], [{ limit: '1001' }], [{ limit: '-1' }], [{ limit: '2.5' }], [{ limit: 'ten' }], [{ limit: '' }], [{ limit: ['1', '2'] }]])(
    '%j is refused, naming limit',
    (query) => {
      expect(() => pageRequestOf(query)).toThrow(
        expect.objectContaining({ code: 'VALIDATION_FAILED', message: `limit must be a whole number from 1 to ${MAX_PAGE_SIZE}` }),
      );
    },
  );

  test('after given twice is refused, naming after', () => {
    expect(() => pageRequestOf({ limit: '2', after: ['a', 'b'] })).toThrow(
      expect.objectContaining({ code: 'VALIDATION_FAILED', message: 'after must be given once' }),
    );
  });
});

describe('pageOf', () => {
  test('pages in name order whatever the stored order, with the next cursor until the end', () => {
    const list = named(['delta', 'alpha', 'echo', 'charlie', 'bravo']);
    expect(pageOf(list, nameOf, { limit: 2, after: undefined })).toEqual({ items: named(['alpha', 'bravo']), next: 'bravo' });
    expect(pageOf(list, nameOf, { limit: 2, after: 'bravo' })).toEqual({ items: named(['charlie', 'delta']), next: 'delta' });
    expect(pageOf(list, nameOf, { limit: 2, after: 'delta' })).toEqual({ items: named(['echo']), next: null });
    expect(pageOf(list, nameOf, { limit: 2, after: 'echo' })).toEqual({ items: [], next: null });
  });

  test('a cursor that names no item starts after where it would sort', () => {
    expect(pageOf(named(['a', 'c', 'e']), nameOf, { limit: 10, after: 'b' }).items).toEqual(named(['c', 'e']));
  });

  test('walking the pages gives every item once, in order, for any list and page size', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.string({ maxLength: 6 })), fc.integer({ min: 1, max: 7 }), (names, limit) => {
        const list = named(names);
        const seen: string[] = [];
        let after: string | undefined;
        for (;;) {
          const { items, next } = pageOf(list, nameOf, { limit, after });
          seen.push(...items.map(nameOf));
          if (next === null) break;
          after = next;
        }
        expect(seen).toEqual([...names].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
      }),
    );
  });

  test('the Link of the next page keeps the limit and encodes the cursor', () => {
    expect(nextLink('/apis', { limit: 2, after: undefined }, 'a b/c')).toBe('</apis?limit=2&after=a%20b%2Fc>; rel="next"');
  });
});
