/**
 * A client connection whose first bytes go out one TCP segment each, 10 ms apart: what a slow or fragmenting
 * network does to the start of a connection (the HTTP/2 preface, say). Given to node:http2's `connect` as its
 * `createConnection`; the rest is written as it comes.
 */
import { connect, type Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';

export function trickle(port: number, slowBytes: number): Duplex {
  const socket: Socket = connect(port, '127.0.0.1');
  socket.setNoDelay(true);
  const connected = new Promise((resolve) => socket.once('connect', resolve));
  let left = slowBytes;
  const duplex = new Duplex({
    write(chunk: Buffer, _encoding, callback) {
      void (async () => {
        await connected;
        for (; left > 0 && chunk.length > 0; left--, chunk = chunk.subarray(1)) {
          socket.write(chunk.subarray(0, 1));
          await delay(10);
        }
        socket.write(chunk, callback);
      })();
    },
    read() {},
    destroy(err, callback) {
      socket.destroy();
      callback(err);
    },
  });
  socket.on('data', (chunk: Buffer) => duplex.push(chunk));
  socket.on('end', () => duplex.push(null));
  socket.on('error', (err) => duplex.destroy(err));
  return duplex;
}
