/**
 * Writing a CR's status (the controller decides what it says): the status subresource only, never the
 * spec, so a status write cannot change a snapshot.
 */
import type { CustomObjectsApi } from '@kubernetes/client-node';
import type { JsonPutter } from './api-client.js';
import { GROUP, VERSION, type ResourceKind } from './crds.js';
import type { StoreInformers } from './informers.js';
import { KINDS, crTarget, unavailable, type CustomResource } from './kinds.js';

export async function writeStatus(
  /** putJson: the status writer (api-client.ts); undefined (an apiserver on plain HTTP): client-node's call. */
  ctx: { putJson: JsonPutter | undefined; api: CustomObjectsApi; namespace: string; informers: StoreInformers },
  resource: ResourceKind,
  metadataName: string,
  status: Record<string, unknown>,
): Promise<void> {
  const kind = KINDS.find((k) => k.resource === resource)!;
  const body = statusBody(ctx.informers.crs(kind).get(metadataName, ctx.namespace), status);
  if (!ctx.putJson) {
    await ctx.api.replaceNamespacedCustomObjectStatus({ ...crTarget(ctx.namespace, kind), name: metadataName, body });
    return;
  }
  await ctx.putJson(
    `/apis/${GROUP}/${VERSION}/namespaces/${encodeURIComponent(ctx.namespace)}/${kind.resource.plural}/${encodeURIComponent(metadataName)}/status`,
    body,
  );
}

/**
 * PUT /status with the resourceVersion read: a concurrent change is a 409 and the controller retries next
 * round. The status and what identifies the object only: the apiserver takes nothing else of a status
 * write (it keeps the stored spec and metadata), so the spec and annotations are not sent back.
 */
function statusBody(current: CustomResource | undefined, status: Record<string, unknown>): object {
  if (!current) throw unavailable('resource is gone');
  const { name, namespace, uid, resourceVersion } = current.metadata ?? {};
  return { apiVersion: current.apiVersion, kind: current.kind, metadata: { name, namespace, uid, resourceVersion }, status };
}
