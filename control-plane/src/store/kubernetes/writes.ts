/**
 * Admin writes as CR changes: creates, replaces and deletes with resourceVersion preconditions (a lost
 * race is a 409 STORE_CONFLICT, never a silent overwrite), the secrets of each CR in a Secret it owns
 * (secret-refs.ts), each write resolving once this replica's informers have seen it (read-your-writes).
 */
import { isDeepStrictEqual } from 'node:util';
import type { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { GatehouseError } from '#proto/errors';
import { definitionsHash, editsFrom } from '#proto/snapshot/codec';
import type { Mutation, StoreState, UpdateResult } from '../index.js';
import { API_VERSION } from './crds.js';
import type { StoreInformers } from './informers.js';
import { KINDS, crTarget, httpStatusOf, reasonOf, sameUid, unavailable, type AnyKind, type CustomResource } from './kinds.js';
import { metadataNameFor } from './resource-names.js';
import { extractSecrets, managedSecretName } from './secret-refs.js';
import type { Verdicts } from './verdicts.js';

const LISTED_CHANGES = 20;
const MANAGED_BY = 'app.kubernetes.io/managed-by';

export interface WriteContext {
  api: CustomObjectsApi;
  core: CoreV1Api;
  namespace: string;
  informers: StoreInformers;
  verdicts: Verdicts;
  /** Resolves once `done` holds after this replica's informers and passes; a 503 after the observe timeout. */
  observed(done: () => boolean): Promise<void>;
}

/**
 * An admin write on one definition is one CR change. PUT /config and rollbacks are many, which
 * Kubernetes cannot make atomic: they run one by one in an order that leaves no dangling oauth2
 * reference in between (OAuth servers and users created or updated before APIs; APIs deleted
 * before servers), and the first failure stops the run with an error that says which changes
 * were applied and which were not.
 */
export async function applyMutation(ctx: WriteContext, mutation: Mutation): Promise<UpdateResult> {
  const state = ctx.verdicts.state;
  const after = await mutation(state.defs);
  if (definitionsHash(after) === ctx.verdicts.state.hash) return { ...ctx.verdicts.state, changed: false };
  const changes = planChanges(state, after);
  for (const [index, change] of changes.entries()) {
    try {
      await write(ctx, change.kind, change.prev, change.def);
    } catch (err) {
      if (changes.length === 1 || !(err instanceof GatehouseError)) throw err;
      throw partiallyApplied(
        err,
        changes.slice(0, index).map((c) => c.what),
        changes.slice(index).map((c) => c.what),
      );
    }
  }
  return { ...ctx.verdicts.state, changed: true };
}

interface Change {
  kind: AnyKind;
  prev: unknown;
  def: unknown;
  what: string;
}

/** The CR changes from `state` to `after`, in the order applyMutation runs them. */
function planChanges(state: StoreState, after: StoreState['defs']): Change[] {
  const before = state.defs;
  const [apis, servers, ...credentials] = KINDS;
  const changes: Change[] = [];
  // An admin write on one definition records what it changed (deriveDefinitions): no pass over the lists.
  const edits = editsFrom(before, after);
  const plan = (kind: AnyKind, upserts: boolean) => {
    const nameOf = kind.nameOf as (def: unknown) => string;
    if (edits) {
      for (const { kind: k, before: prev, after: def } of edits) {
        if (k !== kind.compileKind) continue;
        if (upserts && def) changes.push({ kind, prev, def, what: `${prev ? 'update' : 'create'} ${kind.resource.kind} "${nameOf(def)}"` });
        else if (!upserts && !def && prev) changes.push({ kind, prev, def: undefined, what: `delete ${kind.resource.kind} "${nameOf(prev)}"` });
      }
      return;
    }
    const old = new Map<string, unknown>((kind.list(before) as unknown[]).map((d) => [nameOf(d), d]));
    const now = new Map<string, unknown>((kind.list(after) as unknown[]).map((d) => [nameOf(d), d]));
    const label = (verb: string, name: string) => `${verb} ${kind.resource.kind} "${name}"`;
    if (!upserts) {
      for (const [name, def] of old) if (!now.has(name)) changes.push({ kind, prev: def, def: undefined, what: label('delete', name) });
      return;
    }
    for (const [name, def] of now) {
      const prev = old.get(name);
      // Definitions are normalised with a fixed key order, so equal JSON = equal definition. A mutation
      // keeps the objects it does not change: only the others are serialised.
      if (!prev || (prev !== def && JSON.stringify(prev) !== JSON.stringify(def)))
        changes.push({ kind, prev, def, what: label(prev ? 'update' : 'create', name) });
    }
  };
  for (const kind of [servers, ...credentials, apis]) plan(kind, true);
  for (const kind of [apis, servers, ...credentials]) plan(kind, false);
  return changes;
}

/** One definition created (no `before`), replaced, or deleted (no `after`). */
async function write<T>(ctx: WriteContext, kind: AnyKind, before: T | undefined, after: T | undefined): Promise<void> {
  const nameOf = kind.nameOf as (def: T) => string;
  try {
    if (!before && after) await create(ctx, kind, metadataNameFor(nameOf(after)), after);
    else if (before && after) await replace(ctx, kind, current(ctx, kind, nameOf(before)), after);
    else if (before && !after) await remove(ctx, kind, current(ctx, kind, nameOf(before)));
  } catch (err) {
    if (err instanceof GatehouseError) throw err;
    translate(kind, err);
  }
}

const crBody = (kind: AnyKind, metadata: Record<string, unknown>, spec: object) => ({ apiVersion: API_VERSION, kind: kind.resource.kind, metadata, spec });

async function create(ctx: WriteContext, kind: AnyKind, metadataName: string, def: object): Promise<void> {
  const { api, namespace } = ctx;
  const target = crTarget(namespace, kind);
  const { spec, data } = specAndSecrets(ctx, kind, def, metadataName);
  // The CR first: creating it claims the name (a Secret written first could be another replica's, losing the race).
  const created = (await api.createNamespacedCustomObject({ ...target, body: crBody(kind, { name: metadataName, namespace }, spec) })) as CustomResource;
  const rv = created.metadata?.resourceVersion;
  try {
    await putSecret(ctx, kind, created, data);
  } catch (err) {
    await api.deleteNamespacedCustomObject({ ...target, name: metadataName, body: { preconditions: { uid: created.metadata!.uid } } }).catch(() => {});
    throw err;
  }
  await ctx.observed(() => {
    // Not in the cache yet is not done: the informer has not seen the create.
    const seen = ctx.informers.crs(kind).get(metadataName, namespace);
    return seen !== undefined && (seen.metadata?.resourceVersion === rv || !sameUid(seen, created));
  });
}

async function replace(ctx: WriteContext, kind: AnyKind, current: CustomResource, def: object): Promise<void> {
  const { namespace } = ctx;
  const informer = ctx.informers.crs(kind);
  const metadataName = current.metadata!.name!;
  const { spec, data } = specAndSecrets(ctx, kind, def, metadataName, current);
  // Keys the CR reads now stay until it no longer does: the old spec never names a key the Secret lacks.
  const held = ctx.informers.lookupSecret(managedSecretName(kind.resource.singular, metadataName))?.data ?? {};
  await putSecret(ctx, kind, current, { ...held, ...data });
  const put = (metadata: CustomResource['metadata']) =>
    ctx.api.replaceNamespacedCustomObject({
      ...crTarget(namespace, kind),
      name: metadataName,
      // resourceVersion = what this replica read: a change made meanwhile anywhere makes this a 409.
      body: crBody(kind, { ...metadata }, spec),
    }) as Promise<CustomResource>;
  const replaced = await unlessSpecMoved(ctx, kind, current, put);
  const rv = replaced.metadata?.resourceVersion;
  await ctx.observed(
    () => informer.get(metadataName, namespace)?.metadata?.resourceVersion === rv || !sameUid(informer.get(metadataName, namespace), replaced),
  );
  await putSecret(ctx, kind, replaced, data);
}

async function remove(ctx: WriteContext, kind: AnyKind, current: CustomResource): Promise<void> {
  const metadataName = current.metadata!.name!;
  await unlessSpecMoved(ctx, kind, current, (metadata) =>
    ctx.api.deleteNamespacedCustomObject({
      ...crTarget(ctx.namespace, kind),
      name: metadataName,
      body: { preconditions: { uid: metadata!.uid, resourceVersion: metadata!.resourceVersion } },
    }),
  );
  await ctx.observed(() => !sameUid(ctx.informers.crs(kind).get(metadataName, ctx.namespace), current));
}

/** The cached CR holding the accepted definition `name`; 404 when none does. */
function current(ctx: WriteContext, kind: AnyKind, name: string): CustomResource {
  const metadataName = ctx.verdicts.acceptedName(kind, name);
  const found = metadataName === undefined ? undefined : ctx.informers.crs(kind).get(metadataName, ctx.namespace);
  if (!found) throw new GatehouseError(kind.notFound.code, kind.notFound.message);
  return found;
}

function translate(kind: AnyKind, err: unknown): never {
  const status = httpStatusOf(err);
  if (status === 409 && reasonOf(err) === 'AlreadyExists') throw new GatehouseError(kind.nameTaken.code, kind.nameTaken.message, { cause: err });
  if (status === 409) {
    throw new GatehouseError('STORE_CONFLICT', `${kind.resource.kind} was changed by someone else meanwhile; read it again and retry`, { cause: err });
  }
  if (status === 404) throw new GatehouseError(kind.notFound.code, kind.notFound.message, { cause: err });
  if (status === 422 || status === 400) {
    const message = (err as { body?: { message?: string } }).body?.message ?? 'rejected by the Kubernetes API';
    throw new GatehouseError('VALIDATION_FAILED', message, { cause: err });
  }
  throw unavailable('the Kubernetes API refused or failed the write', err);
}

/**
 * Runs a write with the resourceVersion this replica read. A status write (the controller's) also
 * moves resourceVersion: when only that happened, the write is made once more with the fresh one;
 * a changed spec (or a new object) is a lost race, and its 409 stands.
 */
async function unlessSpecMoved<R>(
  ctx: WriteContext,
  kind: AnyKind,
  current: CustomResource,
  attempt: (metadata: CustomResource['metadata']) => Promise<R>,
): Promise<R> {
  try {
    return await attempt(current.metadata);
  } catch (err) {
    if (httpStatusOf(err) !== 409) throw err;
    const fresh = (await ctx.api.getNamespacedCustomObject({ ...crTarget(ctx.namespace, kind), name: current.metadata!.name! })) as CustomResource;
    if (fresh.metadata?.uid !== current.metadata?.uid || JSON.stringify(fresh.spec) !== JSON.stringify(current.spec)) throw err;
    return attempt(fresh.metadata);
  }
}

/**
 * Writes the Secret holding a CR's secrets (secret-refs.ts), owned by the CR, unless it already holds
 * exactly that; resolves once this replica has seen it and parsed the CRs that read it again.
 */
async function putSecret(ctx: WriteContext, kind: AnyKind, owner: CustomResource, data: Record<string, string>): Promise<void> {
  const { namespace, core } = ctx;
  const name = managedSecretName(kind.resource.singular, owner.metadata!.name!);
  const existing = ctx.informers.lookupSecret(name);
  if (!existing && Object.keys(data).length === 0) return;
  if (existing && existing.metadata?.labels?.[MANAGED_BY] !== 'gatehouse') {
    throw new GatehouseError('STORE_CONFLICT', `Secret "${name}" exists and is not managed by gatehouse; rename or remove it`);
  }
  const ownerReferences = [{ apiVersion: API_VERSION, kind: kind.resource.kind, name: owner.metadata!.name!, uid: owner.metadata!.uid! }];
  if (existing && isDeepStrictEqual(existing.data ?? {}, data) && isDeepStrictEqual(existing.metadata?.ownerReferences, ownerReferences)) return;
  const metadata = { name, namespace, labels: { [MANAGED_BY]: 'gatehouse' }, ownerReferences, resourceVersion: existing?.metadata?.resourceVersion };
  const body = { apiVersion: 'v1', kind: 'Secret', type: 'Opaque', metadata, data };
  const written = existing ? await core.replaceNamespacedSecret({ name, namespace, body }) : await core.createNamespacedSecret({ namespace, body });
  const rv = written.metadata?.resourceVersion;
  await ctx.observed(() => ctx.informers.lookupSecret(name)?.metadata?.resourceVersion === rv);
}

/** The spec of `def` with its secrets as references, and the data of the CR's own Secret. */
function specAndSecrets(ctx: WriteContext, kind: AnyKind, def: object, metadataName: string, current?: CustomResource) {
  return extractSecrets(kind.compileKind, def, current?.spec, ctx.informers.lookupSecret, managedSecretName(kind.resource.singular, metadataName));
}

/** The failed change's error, with what a multi-change write had applied before it and what it had not. */
function partiallyApplied(err: GatehouseError, applied: string[], notApplied: string[]): GatehouseError {
  const list = (items: string[]) =>
    items.length > LISTED_CHANGES ? `${items.slice(0, LISTED_CHANGES).join(', ')} and ${items.length - LISTED_CHANGES} more` : items.join(', ') || 'none';
  return new GatehouseError(
    err.code,
    `${err.message} (partially applied: ${applied.length} of ${applied.length + notApplied.length} changes done: ${list(applied)}; not applied: ${list(notApplied)})`,
    {
      field: err.field,
      cause: err,
    },
  );
}
