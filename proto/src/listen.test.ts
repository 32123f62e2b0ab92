import { createServer } from 'node:net';
import { bindListener, listen, listenErrorOf, ListenError, type ListenerSetting } from './listen.js';

const admin = (host: string | undefined): ListenerSetting => ({ listener: 'admin', portVariable: 'ADMIN_PORT', hostVariable: 'ADMIN_HOST', port: 8081, host });
const systemError = (code: string): NodeJS.ErrnoException => Object.assign(new Error(`listen ${code}`), { code });

describe('listenErrorOf: one sentence naming the variable and the port', () => {
  test.each([
    ['port in use (node:net)', systemError('EADDRINUSE'), '127.0.0.1', 'ADMIN_PORT 8081 is already in use on 127.0.0.1', 'EADDRINUSE'],
    ['port in use, every interface', systemError('EADDRINUSE'), undefined, 'ADMIN_PORT 8081 is already in use', 'EADDRINUSE'],
    [
      'port in use (grpc-js message)',
      new Error('No address added out of total 1 resolved errors: [listen EADDRINUSE: address already in use 127.0.0.1:8081]'),
      '127.0.0.1',
      'ADMIN_PORT 8081 is already in use on 127.0.0.1',
      'EADDRINUSE',
    ],
    [
      'privileged port',
      systemError('EACCES'),
      '0.0.0.0',
      'ADMIN_PORT 8081 may not be bound by this user (ports below 1024 need root or CAP_NET_BIND_SERVICE)',
      'EACCES',
    ],
    [
      'address not on this machine',
      systemError('EADDRNOTAVAIL'),
      '10.9.9.9',
      'ADMIN_HOST 10.9.9.9 is not an address of this machine (ADMIN_PORT 8081)',
      'EADDRNOTAVAIL',
    ],
    [
      'unresolvable host (node:net)',
      systemError('ENOTFOUND'),
      'nowhere.invalid',
      'ADMIN_HOST nowhere.invalid does not resolve to an address (ADMIN_PORT 8081)',
      'ENOTFOUND',
    ],
    [
      'unresolvable host (grpc-js message)',
      new Error('Name resolution failed for target dns:nowhere.invalid:8081'),
      'nowhere.invalid',
      'ADMIN_HOST nowhere.invalid does not resolve to an address (ADMIN_PORT 8081)',
      'ENOTFOUND',
    ],
    ['anything else keeps its own words', new Error('boom'), undefined, 'ADMIN_PORT 8081 could not be bound: boom', undefined],
  ])('%s', (_name, err, host, message, code) => {
    const error = listenErrorOf(err, admin(host));
    expect(error).toBeInstanceOf(ListenError);
    expect({ message: error.message, code: error.code }).toEqual({ message, code });
  });
});

test('bindListener turns a real bind failure into a ListenError', async () => {
  const holder = createServer();
  const port = await listen(holder, 0, '127.0.0.1');
  const second = createServer();
  try {
    const setting = { ...admin('127.0.0.1'), port };
    await expect(bindListener(setting, () => listen(second, port, '127.0.0.1'))).rejects.toThrow(`ADMIN_PORT ${port} is already in use on 127.0.0.1`);
  } finally {
    await new Promise<void>((resolve) => holder.close(() => resolve()));
  }
});
