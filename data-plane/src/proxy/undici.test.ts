/**
 * undici.ts loads undici's own files and adds names to an internal table of theirs, neither of which undici
 * promises to keep: package.json pins the version exactly, and these tests fail when an upgrade moves either.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { createRequire } from 'node:module';
import constantsModule from 'undici/lib/core/constants.js';
import { Pool } from './undici.js';

const table = (constantsModule as { headerNameLowerCasedRecord: Record<string, string> }).headerNameLowerCasedRecord;

test('undici is installed at exactly the version package.json pins', () => {
  const pinned = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { dependencies: Record<string, string> }).dependencies
    .undici;
  const installed = (createRequire(import.meta.url)('undici/package.json') as { version: string }).version;
  expect(pinned).toMatch(/^\d+\.\d+\.\d+$/);
  expect(installed).toBe(pinned);
});

test("undici's request checks look a header name up in headerNameLowerCasedRecord before testing it", async () => {
  // A name outside the token grammar: refused unless the table holds it, which shows the table is read first.
  const name = 'x-probe@';
  const received: string[] = [];
  const server = createServer((socket: Socket) => {
    socket.on('data', (chunk: Buffer) => {
      received.push(chunk.toString('latin1'));
      socket.end('HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const pool = new Pool(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
  try {
    await expect(pool.request({ method: 'GET', path: '/', headers: [name, '1'] })).rejects.toThrow('invalid header key');
    table[name] = name;
    const res = await pool.request({ method: 'GET', path: '/', headers: [name, '1'] });
    await res.body.dump();
    expect(received.join('')).toContain(`\r\n${name}: 1\r\n`);
  } finally {
    delete table[name];
    await pool.close();
    server.close();
  }
});
