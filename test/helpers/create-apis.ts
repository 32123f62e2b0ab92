/**
 * Creates API definitions through the admin API, each expected to be accepted (201), then waits
 * until every data plane of the gateway serves the last write.
 */
import type { AdminResponse } from './admin-client.js';
import type { Gateway } from './start-gateway.js';

export async function createApis(gw: Gateway, definitions: readonly unknown[]): Promise<void> {
  let last: AdminResponse | undefined;
  for (const definition of definitions) {
    last = await gw.admin.createApi(definition);
    if (last.status !== 201) throw new Error(`creating an API answered ${last.status}: ${JSON.stringify(last.body)}`);
  }
  if (last) await gw.admin.waitForDataPlanes(last, gw.dps);
}
