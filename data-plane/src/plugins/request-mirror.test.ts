import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { MIRROR_BODY_BYTES, MirrorCopy, type CopyFailure } from './request-mirror.js';

const request = (headers: Record<string, string>) => ({ headers, httpVersionMajor: 1 }) as unknown as IncomingMessage;
const chunked = request({ 'transfer-encoding': 'chunked' });

/** The copy's fate once `chunks` streamed through its tee, and what the primary read. */
async function through(copy: MirrorCopy, chunks: Buffer[]): Promise<{ primary: string; fate: CopyFailure | null | 'pending' }> {
  let fate: CopyFailure | null | 'pending' = 'pending';
  copy.whenReady((f) => (fate = f));
  const primary = await text(copy.tee(Readable.from(chunks)));
  return { primary, fate };
}

test('a body within the bound is copied whole', async () => {
  const copy = new MirrorCopy('http://m', chunked);
  copy.take = () => true;
  expect(await through(copy, [Buffer.from('ab'), Buffer.from('cd')])).toEqual({ primary: 'abcd', fate: null });
  expect(Buffer.concat(copy.chunks).toString()).toBe('abcd');
});

test('past the bound the copy is given up and the primary still reads every byte', async () => {
  const copy = new MirrorCopy('http://m', chunked);
  copy.take = () => true;
  const half = Buffer.alloc(MIRROR_BODY_BYTES / 2 + 1, 0x61);
  const { primary, fate } = await through(copy, [half, half]);
  expect(primary.length).toBe(2 * half.length);
  expect(fate).toBe('body_too_large');
  expect(copy.chunks).toEqual([]);
});

test('a Content-Length over the bound gives the copy up before any byte', () => {
  let fate: CopyFailure | null | undefined;
  new MirrorCopy('http://m', request({ 'content-length': String(MIRROR_BODY_BYTES + 1) })).whenReady((f) => (fate = f));
  expect(fate).toBe('body_too_large');
});

test('a spent budget, or no admission, gives the copy up as overloaded', async () => {
  const copy = new MirrorCopy('http://m', chunked);
  expect(await through(copy, [Buffer.from('ab')])).toEqual({ primary: 'ab', fate: 'overloaded' });
});

test('a request without a body is ready at once; a client body cut short is aborted', async () => {
  let fate: CopyFailure | null | undefined;
  new MirrorCopy('http://m', request({})).whenReady((f) => (fate = f));
  expect(fate).toBeNull();
  const copy = new MirrorCopy('http://m', chunked);
  copy.take = () => true;
  copy.whenReady((f) => (fate = f));
  const source = new Readable({ read() {} });
  const tee = copy.tee(source);
  tee.on('error', () => undefined);
  tee.resume();
  source.push('ab');
  source.destroy(new Error('client left'));
  await new Promise((resolve) => tee.once('close', resolve));
  expect(fate).toBe('aborted');
});
