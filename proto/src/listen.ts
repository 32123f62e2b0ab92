import type { Server } from 'node:net';

/** Bind a server and resolve with the port it got (PORT=0 means ephemeral); reject on a bind error. */
export function listen(server: Server, port: number, host?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const address = server.address();
      resolve(typeof address === 'object' && address ? address.port : port);
    });
  });
}
