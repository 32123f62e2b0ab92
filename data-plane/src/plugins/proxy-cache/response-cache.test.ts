import { PassThrough } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Registry } from 'prom-client';
import { copyingStream } from './index.js';
import { createResponseCache, type CachedResponse } from './response-cache.js';

const entry = (body: string, storedAt = 0, expiresAt = 1000): CachedResponse => ({
  status: 200,
  headers: { 'content-type': 'text/plain' },
  body: Buffer.from(body),
  storedAt,
  expiresAt,
});

describe('createResponseCache', () => {
  test('each stage instance gets a namespace of its own', () => {
    const cache = createResponseCache({ maxBytes: 1024 ** 2 });
    expect(cache.namespace()).not.toBe(cache.namespace());
  });

  test('a primary key keeps its Vary names; each variant is an entry; a variant without Vary values does not replace the names', () => {
    const cache = createResponseCache({ maxBytes: 1024 ** 2 });
    expect(cache.varyOf('k')).toBeNull();
    cache.set('k', [], 'k', entry('plain'));
    expect(cache.varyOf('k')).toEqual([]);
    expect(cache.get('k', 0)?.body.toString()).toBe('plain');
    cache.set('k', ['accept-encoding'], 'k\0gzip', entry('gz'));
    expect(cache.varyOf('k')).toEqual(['accept-encoding']);
    expect(cache.get('k\0gzip', 0)?.body.toString()).toBe('gz');
  });

  test('a stale entry is not returned, and is dropped', () => {
    const cache = createResponseCache({ maxBytes: 1024 ** 2 });
    cache.set('k', [], 'k', entry('old', 0, 1000));
    expect(cache.get('k', 999)).not.toBeNull();
    const before = cache.size;
    expect(cache.get('k', 1000)).toBeNull();
    expect(cache.size).toBeLessThan(before);
  });

  test('the bytes held stay within maxBytes: the least recently used entries leave', () => {
    const cache = createResponseCache({ maxBytes: 10_000 });
    for (let i = 0; i < 20; i++) cache.set(`k${i}`, [], `k${i}`, entry('x'.repeat(1000)));
    expect(cache.size).toBeLessThanOrEqual(10_000);
    expect(cache.get('k0', 0)).toBeNull();
    expect(cache.get('k19', 0)).not.toBeNull();
  });

  test('gatehouse_proxy_cache_total counts by route and status', async () => {
    const registry = new Registry();
    const cache = createResponseCache({ maxBytes: 1024 ** 2, registry });
    cache.count('r1', 'Hit');
    cache.count('r1', 'Hit');
    cache.count('r1', 'Miss');
    const metric = await registry.getSingleMetric('gatehouse_proxy_cache_total')!.get();
    expect(metric.values).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ labels: { route: 'r1', status: 'Hit' }, value: 2 }),
        expect.objectContaining({ labels: { route: 'r1', status: 'Miss' }, value: 1 }),
      ]),
    );
  });
});

describe('copyingStream', () => {
  async function run(chunks: string[], limit: number): Promise<{ out: string; copy: string | null }> {
    let copy: string | null = null;
    let out = '';
    const sink = new PassThrough();
    sink.on('data', (c: Buffer) => (out += c.toString()));
    const source = new PassThrough();
    const done = pipeline(
      source,
      copyingStream(limit, (body) => (copy = body.toString())),
      sink,
    );
    for (const c of chunks) source.write(c);
    source.end();
    await done;
    return { out, copy };
  }

  test('passes every chunk on and hands over the whole body once it ended', async () => {
    expect(await run(['ab', 'cd'], 4)).toEqual({ out: 'abcd', copy: 'abcd' });
  });

  test('past the limit the copy is dropped, the client still gets every byte', async () => {
    expect(await run(['ab', 'cd', 'e'], 4)).toEqual({ out: 'abcde', copy: null });
  });

  test('a body that did not end is never handed over', async () => {
    let copied = false;
    const stream = copyingStream(100, () => (copied = true));
    const closed = new Promise((resolve) => stream.once('close', resolve));
    stream.on('error', () => {});
    stream.write('partial');
    stream.destroy(new Error('upstream reset'));
    await closed;
    expect(copied).toBe(false);
  });
});
