import { IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import { GatehouseError } from '#proto/errors';
import type { CompiledRoute } from '#proto/compile/index';
import { PluginExchange, runRequestHooks, type Pipeline, type RequestHook } from './pipeline.js';

function walk(request: RequestHook[]): unknown {
  const pipeline: Pipeline = { request, response: [], forward: [] };
  const ex = new PluginExchange(new IncomingMessage(new Socket()), { route: { id: 'r' } as CompiledRoute, params: {}, matched: '' }, 'id', '/', '', pipeline);
  return runRequestHooks(pipeline, ex);
}

describe('runRequestHooks', () => {
  test('runs every hook in order and resolves null when none answers, synchronous and asynchronous hooks alike', async () => {
    const ran: string[] = [];
    const result = walk([() => void ran.push('sync 1'), () => Promise.resolve().then(() => void ran.push('async 2')), () => void ran.push('sync 3')]);
    expect(ran).toEqual(['sync 1']);
    await expect(result).resolves.toBeNull();
    expect(ran).toEqual(['sync 1', 'async 2', 'sync 3']);
  });

  test('while every hook returns synchronously, so does the walk: the answer or null, no promise', () => {
    const ran: string[] = [];
    expect(walk([() => void ran.push('sync 1'), () => void ran.push('sync 2')])).toBeNull();
    expect(ran).toEqual(['sync 1', 'sync 2']);
  });

  test('the first answer ends the walk, whether it comes synchronously or from a promise', async () => {
    let later = 0;
    const after = () => void later++;
    expect(walk([() => ({ status: 204 }), after])).toEqual({ status: 204 });
    await expect(walk([() => Promise.resolve({ status: 204 }), after])).resolves.toEqual({ status: 204 });
    expect(later).toBe(0);
  });

  test('a hook that throws refuses as a rejection (never a synchronous throw), and no later hook runs', async () => {
    const refused = new GatehouseError('CREDENTIALS_REJECTED', 'invalid credentials');
    let later = 0;
    const after = () => void later++;
    let result: unknown;
    expect(() => {
      result = walk([
        () => {
          throw refused;
        },
        after,
      ]);
    }).not.toThrow();
    await expect(result).rejects.toBe(refused);
    await expect(walk([() => Promise.resolve(), () => Promise.reject(refused), after])).rejects.toBe(refused);
    expect(later).toBe(0);
  });
});
