import { PassThrough } from 'node:stream';
import { answerOnSocket, isWebSocketHandshake, switchProtocols } from './upgrade.js';

function written(write: (socket: PassThrough) => void): string {
  const socket = new PassThrough();
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  write(socket);
  return Buffer.concat(chunks).toString('latin1');
}

describe('isWebSocketHandshake', () => {
  test.each([
    ['GET', 'websocket', true],
    ['GET', 'WebSocket', true],
    ['POST', 'websocket', false],
    ['GET', 'h2c', false],
    ['GET', 'websocket, h2c', false],
    ['GET', undefined, false],
  ])('%s with Upgrade: %s → %s', (method, upgrade, expected) => {
    expect(isWebSocketHandshake({ method, headers: upgrade === undefined ? {} : { upgrade } })).toBe(expected);
  });
});

describe('answerOnSocket: a whole response on a connection without a ServerResponse', () => {
  test('status line, headers, its own length and Connection: close, then the body', () => {
    expect(written((s) => answerOnSocket(s, 401, { 'www-authenticate': 'Basic realm="x"', 'x-list': ['a', 'b'] }, '"no"'))).toBe(
      'HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Basic realm="x"\r\nx-list: a\r\nx-list: b\r\ncontent-length: 4\r\nconnection: close\r\n\r\n"no"',
    );
  });

  test('framing headers of the caller are replaced, and a header node would refuse is left out, never written raw', () => {
    const text = written((s) =>
      answerOnSocket(
        s,
        403,
        { 'content-length': '999', 'Transfer-Encoding': 'chunked', connection: 'keep-alive', 'x-evil': 'a\r\nset-cookie: b', 'bad name': 'v', 'x-ok': '1' },
        'no',
      ),
    );
    expect(text).toBe('HTTP/1.1 403 Forbidden\r\nx-ok: 1\r\ncontent-length: 2\r\nconnection: close\r\n\r\nno');
  });
});

test('switchProtocols writes the 101 head and leaves the connection open', () => {
  const socket = new PassThrough();
  let text = '';
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
  switchProtocols(socket, { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-accept': 'abc=', 'x-evil': 'x\r\ny' });
  expect(text).toBe('HTTP/1.1 101 Switching Protocols\r\nconnection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-accept: abc=\r\n\r\n');
  expect(socket.writableEnded).toBe(false);
});
