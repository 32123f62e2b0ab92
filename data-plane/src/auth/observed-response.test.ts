import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { EndpointObserver } from './index.js';
import { observedResponse } from './observed-response.js';

function recorder() {
  const events: string[] = [];
  let release: () => void = () => undefined;
  const observer: EndpointObserver = {
    requestChunk: () => undefined,
    response: () => undefined,
    responseChunk: (c) => void events.push(`observer saw ${c.toString()}`),
    finish: () =>
      new Promise<void>((resolve) => {
        events.push('finish started');
        release = () => {
          events.push('finish done');
          resolve();
        };
      }),
  };
  const sink = new Writable({
    write(chunk: Buffer, _e, cb) {
      events.push(`client got ${chunk.toString()}`);
      cb();
    },
    final(cb) {
      events.push('client end');
      cb();
    },
  });
  return { events, observer, sink, release: () => release() };
}

test('every byte passes unchanged, and the last chunk waits for finish()', async () => {
  const r = recorder();
  const done = pipeline(Readable.from([Buffer.from('a'), Buffer.from('b'), Buffer.from('c')]), observedResponse(r.observer), r.sink);
  await new Promise((resolve) => setTimeout(resolve, 20));
  expect(r.events).toEqual(['observer saw a', 'observer saw b', 'client got a', 'observer saw c', 'client got b', 'finish started']);
  r.release();
  await done;
  expect(r.events.slice(-3)).toEqual(['finish done', 'client got c', 'client end']);
});

test('an empty body still ends after finish()', async () => {
  const r = recorder();
  const done = pipeline(Readable.from([]), observedResponse(r.observer), r.sink);
  await new Promise((resolve) => setTimeout(resolve, 20));
  expect(r.events).toEqual(['finish started']);
  r.release();
  await done;
  expect(r.events).toEqual(['finish started', 'finish done', 'client end']);
});

test('an observer that throws or rejects never alters the stream', async () => {
  const chunks: string[] = [];
  const observer: EndpointObserver = {
    requestChunk: () => undefined,
    response: () => undefined,
    responseChunk: () => {
      throw new Error('boom');
    },
    finish: () => Promise.reject(new Error('boom')),
  };
  await pipeline(
    Readable.from([Buffer.from('x'), Buffer.from('y')]),
    observedResponse(observer),
    new Writable({
      write: (c: Buffer, _e, cb) => {
        chunks.push(c.toString());
        cb();
      },
    }),
  );
  expect(chunks).toEqual(['x', 'y']);
});
