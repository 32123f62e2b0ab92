/**
 * Writing a CR's status (the controller decides what it says): the status subresource only, never the
 * spec, so a status write cannot change a snapshot.
 */
import type { StatusWriter } from './api-client.js';
import type { ResourceKind } from './crds.js';
import type { StoreInformers } from './informers.js';
import { KINDS, crTarget, unavailable } from './kinds.js';

/** PUT /status with the resourceVersion read: a concurrent change is a 409 and the controller retries next round. */
export async function writeStatus(
  ctx: { write: StatusWriter; namespace: string; informers: StoreInformers },
  resource: ResourceKind,
  metadataName: string,
  status: Record<string, unknown>,
): Promise<void> {
  const kind = KINDS.find((k) => k.resource === resource)!;
  const current = ctx.informers.crs(kind).get(metadataName, ctx.namespace);
  if (!current) throw unavailable('resource is gone');
  await ctx.write({ ...crTarget(ctx.namespace, kind), name: metadataName }, current, status);
}
