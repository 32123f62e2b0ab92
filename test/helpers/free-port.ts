/**
 * A loopback port that was free a moment ago (bound on :0, read, released): for a service that
 * must be told its port up front, or as an address nothing listens on (refused connections).
 */
import { createServer } from 'node:net';
import { listen } from '#proto/listen';

export async function freePort(): Promise<number> {
  const server = createServer();
  const port = await listen(server, 0, '127.0.0.1');
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** `n` distinct such ports: all bound at once, so that two calls cannot be handed the same one. */
export async function freePorts(n: number): Promise<number[]> {
  const servers = Array.from({ length: n }, () => createServer());
  const ports = await Promise.all(servers.map((server) => listen(server, 0, '127.0.0.1')));
  await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
  return ports;
}
