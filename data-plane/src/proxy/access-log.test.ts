import { mkdtempSync, openSync, closeSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import fc from 'fast-check';
import { pino } from 'pino';
import { accessLine, AccessLineWriter, type AccessRecord } from './access-log.js';

/** What pino itself writes for `info(record, 'access')` from a logger with these base bindings (the writer's reference). */
function pinoLine(record: AccessRecord, base: Record<string, unknown>): string {
  let line = '';
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      line += chunk.toString();
      done();
    },
  });
  pino({ level: 'info', base }, sink).info(record, 'access');
  return line;
}

// Any string a request can carry into a record, escapes, control characters and lone surrogates included.
const text = fc.string({ unit: 'binary', maxLength: 40 });
const optional = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
const record: fc.Arbitrary<AccessRecord> = fc
  .record({
    requestId: text,
    method: optional(text),
    path: text,
    protocol: fc.constantFrom('HTTP/1.0', 'HTTP/1.1', 'HTTP/2'),
    host: optional(text),
    route: fc.option(text, { nil: null }),
    upstream: fc.option(text, { nil: null }),
    status: fc.integer({ min: 0, max: 599 }),
    bytes: fc.nat(),
    durationMs: fc.double({ min: 0, max: 1e6, noNaN: true }).map((ms) => Math.round(ms * 1000) / 1000),
    clientIp: optional(text),
    consumer: optional(text),
    grpcStatus: optional(fc.integer({ min: 0, max: 16 })),
    aborted: fc.boolean(),
  })
  .map(({ aborted, consumer, grpcStatus, ...rest }) => ({
    ...rest,
    ...(consumer !== undefined && { consumer }),
    ...(grpcStatus !== undefined && { grpcStatus }),
    ...(aborted && { aborted: true as const }),
  }));

test('accessLine writes exactly the line pino writes for the same record and bindings (any field values)', () => {
  const bases = [{}, { service: 'data-plane' }, { pid: 42, hostname: 'dp-0', service: 'data-plane', worker: 2 }];
  fc.assert(
    fc.property(record, fc.constantFrom(...bases), (r, base) => {
      const expected = pinoLine(r, base);
      const time = Number(/"time":(\d+)/.exec(expected)![1]);
      const bindings = Object.keys(base).length === 0 ? '' : `,${JSON.stringify(base).slice(1, -1)}`;
      expect(accessLine(r, time, bindings)).toBe(expected);
    }),
    { numRuns: 2_000 },
  );
});

describe('AccessLineWriter', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'access-writer-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  test('holds lines until 4 KB gather or flush() is called, then writes them whole and in order', () => {
    const file = join(dir, 'out');
    const fd = openSync(file, 'w');
    try {
      const writer = new AccessLineWriter(fd);
      const lines = Array.from({ length: 40 }, (_, i) => `{"n":${i},"pad":"${'x'.repeat(200)}"}\n`);
      for (const line of lines.slice(0, 10)) writer.write(line);
      expect(readFileSync(file, 'utf8')).toBe(''); // 2.1 KB: still held
      for (const line of lines.slice(10)) writer.write(line);
      const written = readFileSync(file, 'utf8');
      expect(written.length).toBeGreaterThan(0);
      expect(lines.join('').startsWith(written)).toBe(true); // whole lines, in order
      expect(written.length).toBeLessThanOrEqual(lines.join('').length);
      writer.flush();
      expect(readFileSync(file, 'utf8')).toBe(lines.join(''));
    } finally {
      closeSync(fd);
    }
  });

  test('a line longer than a batch is written on its own, after what was held', () => {
    const file = join(dir, 'out');
    const fd = openSync(file, 'w');
    try {
      const writer = new AccessLineWriter(fd);
      writer.write('first\n');
      const long = `${'é'.repeat(5_000)}\n`; // 10 KB in UTF-8
      writer.write(long);
      writer.write('last\n');
      writer.flush();
      expect(readFileSync(file, 'utf8')).toBe(`first\n${long}last\n`);
    } finally {
      closeSync(fd);
    }
  });

  test('a quiet period flushes held lines within about 100 ms', async () => {
    const file = join(dir, 'out');
    const fd = openSync(file, 'w');
    try {
      const writer = new AccessLineWriter(fd);
      writer.write('quiet\n');
      expect(readFileSync(file, 'utf8')).toBe('');
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(readFileSync(file, 'utf8')).toBe('quiet\n');
    } finally {
      closeSync(fd);
    }
  });
});
