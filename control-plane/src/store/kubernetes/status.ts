/**
 * Writing a CR's status (the controller decides what it says): the status subresource only, never the
 * spec, so a status write cannot change a snapshot.
 */
import type { CustomObjectsApi } from '@kubernetes/client-node';
import type { ResourceKind } from './crds.js';
import type { StoreInformers } from './informers.js';
import { KINDS, crTarget, unavailable, type CustomResource } from './kinds.js';

export async function writeStatus(
  ctx: { api: CustomObjectsApi; namespace: string; informers: StoreInformers },
  resource: ResourceKind,
  metadataName: string,
  status: Record<string, unknown>,
): Promise<void> {
  const kind = KINDS.find((k) => k.resource === resource)!;
  await ctx.api.replaceNamespacedCustomObjectStatus({
    ...crTarget(ctx.namespace, kind),
    name: metadataName,
    body: statusBody(ctx.informers.crs(kind).get(metadataName, ctx.namespace), status),
  });
}

/** PUT /status with the resourceVersion read: a concurrent change is a 409 and the controller retries next round. */
function statusBody(current: CustomResource | undefined, status: Record<string, unknown>): object {
  if (!current) throw unavailable('resource is gone');
  return { apiVersion: current.apiVersion, kind: current.kind, metadata: current.metadata, spec: current.spec, status };
}
