/**
 * The end of a suite that ran a gateway between servers of its own (upstreams, auth services):
 * the gateway is stopped first, so no data plane is still forwarding to a server being closed,
 * then every server is closed, also when the gateway stopped badly; the gateway's problems ('' when
 * every service exited 0) are returned for the suite to assert once nothing is left running.
 */
import type { Gateway } from './start-gateway.js';

export async function stopGatewayAndServers(gw: Gateway | undefined, ...servers: Array<{ close(): Promise<void> } | undefined>): Promise<string> {
  const problems = gw ? await gw.stop() : '';
  await Promise.all(servers.map((server) => server?.close()));
  return problems;
}
