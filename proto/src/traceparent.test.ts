import { formatTraceparent, newRequestId, newSpanId, newTraceId, newTraceparent, parseTraceparent } from './traceparent.js';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_ID = '00f067aa0ba902b7';
const VALID = `00-${TRACE_ID}-${PARENT_ID}-01`;

describe('parseTraceparent', () => {
  test.each([
    ['version 00, sampled', VALID, { traceId: TRACE_ID, parentId: PARENT_ID, flags: '01' }],
    ['version 00, not sampled', `00-${TRACE_ID}-${PARENT_ID}-00`, { traceId: TRACE_ID, parentId: PARENT_ID, flags: '00' }],
    ['a later version read as 00', `cc-${TRACE_ID}-${PARENT_ID}-01`, { traceId: TRACE_ID, parentId: PARENT_ID, flags: '01' }],
    [
      'a later version with more fields after a dash',
      `cc-${TRACE_ID}-${PARENT_ID}-01-what-the-future-holds`,
      { traceId: TRACE_ID, parentId: PARENT_ID, flags: '01' },
    ],
  ])('valid: %s', (_name, header, expected) => {
    expect(parseTraceparent(header)).toEqual(expected);
  });

  test.each([
    ['absent', undefined],
    ['empty', ''],
    ['not a traceparent', 'garbage'],
    ['upper-case hex', `00-${TRACE_ID.toUpperCase()}-${PARENT_ID}-01`],
    ['version ff', `ff-${TRACE_ID}-${PARENT_ID}-01`],
    ['all-zero trace id', `00-${'0'.repeat(32)}-${PARENT_ID}-01`],
    ['all-zero parent id', `00-${TRACE_ID}-${'0'.repeat(16)}-01`],
    ['short trace id', `00-${TRACE_ID.slice(1)}-${PARENT_ID}-01`],
    ['long parent id', `00-${TRACE_ID}-${PARENT_ID}0-01`],
    ['one-digit flags', `00-${TRACE_ID}-${PARENT_ID}-1`],
    ['version 00 with a trailing field', `${VALID}-extra`],
    ['a later version with trailing text not after a dash', `cc-${TRACE_ID}-${PARENT_ID}-01x`],
    ['two headers joined by Node', `${VALID}, ${VALID}`],
    ['an array of values', [VALID, VALID]],
    ['non-hex characters', `00-${TRACE_ID.slice(0, 31)}g-${PARENT_ID}-01`],
  ])('invalid: %s', (_name, header) => {
    expect(parseTraceparent(header)).toBeNull();
  });

  test('formatTraceparent writes version 00', () => {
    expect(formatTraceparent(TRACE_ID, PARENT_ID, '01')).toBe(VALID);
  });
});

describe('new ids', () => {
  test.each([
    ['trace id', newTraceId, /^[0-9a-f]{32}$/],
    ['span id', newSpanId, /^[0-9a-f]{16}$/],
  ])('a %s is lower-case hex of the right length, never zero, new each time', (_name, make, shape) => {
    const ids = Array.from({ length: 100 }, () => make());
    for (const id of ids) expect(id).toMatch(shape);
    expect(ids.some((id) => /^0+$/.test(id))).toBe(false);
    expect(new Set(ids).size).toBe(ids.length);
  });
});

describe('newRequestId', () => {
  test('version 4 UUIDs (version nibble 4, variant 10), new each time, across pool refills', () => {
    // 10,000 ids take 160,000 bytes of the 64 KiB pool: at least two refills happen in between.
    const ids = Array.from({ length: 10_000 }, () => newRequestId());
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });
  test('each id is its own string, not a view on a shared buffer that the next id overwrites', () => {
    const first = newRequestId();
    const copy = `${first}`;
    newRequestId();
    expect(first).toBe(copy);
  });
});

describe('newTraceparent', () => {
  test('a valid version 00 sampled traceparent with new trace and span ids each time, across pool refills', () => {
    // 5,000 traceparents take 120,000 bytes of the 64 KiB pool: at least one refill happens in between.
    const values = Array.from({ length: 5_000 }, () => newTraceparent());
    const parsed = values.map((value) => parseTraceparent(value));
    for (const [i, p] of parsed.entries()) {
      expect(p).not.toBeNull();
      expect(values[i]).toBe(formatTraceparent(p!.traceId, p!.parentId, '01'));
    }
    expect(new Set(parsed.map((p) => p!.traceId)).size).toBe(values.length);
    expect(new Set(parsed.map((p) => p!.parentId)).size).toBe(values.length);
  });
  test('each value is its own string, not a view on the buffer the next one is written into', () => {
    const first = newTraceparent();
    const copy = `${first}`;
    newTraceparent();
    expect(first).toBe(copy);
  });
});
