/**
 * STORE=kubernetes: definitions are ApiDefinition / OAuthServer / BasicAuthCredential custom resources
 * in one namespace.
 *
 *   informers (list+watch, every kind) → cache → verdicts (parse + compileDefinitions, ranked by
 *   creation time) → accepted Definitions → StoreState (revision moves only with the content hash)
 *
 * Admin writes are turned into creates / updates / deletes of CRs with resourceVersion
 * preconditions (a lost race is a 409, never a silent overwrite), and resolve once this replica's
 * informer has seen them (read-your-writes). A CR that fails validation is left out of the
 * snapshot with its reason (the controller writes it to status); it never blocks the others.
 * The revision is this replica's counter; the hash is the same on every replica for the same CRs.
 */
import { KubeConfig, makeInformer, type Informer, type KubernetesObject, type ObjectCache } from '@kubernetes/client-node';
import { customObjectsApi } from './api-client.js';
import { GatehouseError } from '#proto/errors';
import type { ApiDefinition, BasicAuthCredential, Definitions, OAuthServerDefinition } from '#proto/definition/index';
import { compileDefinitions, createCompileCache } from '#proto/compile/index';
import { definitionsHash } from '#proto/snapshot/codec';
import type { Logger } from '#proto/logger';
import type { DefinitionStore, Mutation, StoreState, UpdateResult } from '../index.js';
import { createUpdateQueue } from '../update-queue.js';
import { storedApis, storedBasicAuthCredentials, storedOAuthServers, type StoredKind } from '../definition-kinds.js';
import { API_DEFINITION, API_VERSION, BASIC_AUTH_CREDENTIAL, GROUP, OAUTH_SERVER, VERSION, type ResourceKind } from './crds.js';
import { metadataNameFor } from './resource-names.js';

export interface CustomResource extends KubernetesObject {
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

/** One CR and what the CP made of it: the input of the controller's status. */
export interface ResourceVerdict {
  resource: ResourceKind;
  metadataName: string;
  uid: string;
  generation: number;
  /** The Janus name: spec.name, else metadata.name. */
  name: string;
  /** null = accepted (part of the snapshot). */
  error: GatehouseError | null;
  /** Accepted only: revision of the first snapshot that carried this generation. */
  sinceRevision: number | null;
  /** The CR's status as last seen (the controller writes only what differs). */
  status: Record<string, unknown> | undefined;
}

export interface KubernetesStore extends DefinitionStore {
  /** Every CR's verdict, by uid. */
  verdicts(): ReadonlyMap<string, ResourceVerdict>;
  /** This replica's latest version with that content hash (bounded history), for reports of other replicas' data planes. */
  revisionOfHash(hash: string): number | undefined;
  hashOfRevision(revision: number): string | undefined;
  /** Called after every pass over the cache (any CR event, status writes included) with the uids whose verdict changed (null: any may have). */
  subscribeResources(listener: (changed: ReadonlySet<string> | null) => void): () => void;
  /** Merge-patches the status subresource (never the spec, so it cannot change a snapshot). */
  patchStatus(resource: ResourceKind, metadataName: string, status: Record<string, unknown>): Promise<void>;
  readonly namespace: string;
}

export interface KubernetesStoreOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  logger: Logger;
  /** How long an admin write waits for the informer to see it (default 10 s). */
  observeTimeoutMs?: number;
  /** First delay of the informer restart backoff (default 500 ms; capped at 10 s). */
  retryBaseMs?: number;
}

/** A stored kind and the custom resource it is kept in. */
interface Kind<T> extends StoredKind<T> {
  resource: ResourceKind;
}

const KINDS = [
  { resource: API_DEFINITION, ...storedApis } satisfies Kind<ApiDefinition>,
  { resource: OAUTH_SERVER, ...storedOAuthServers } satisfies Kind<OAuthServerDefinition>,
  { resource: BASIC_AUTH_CREDENTIAL, ...storedBasicAuthCredentials } satisfies Kind<BasicAuthCredential>,
] as const;

type AnyKind = (typeof KINDS)[number];

const FIRST_REVISION = 1;
const HISTORY = 1024;
/** Watches are cheap to retry; a long cap would only delay recovery after an apiserver restart. */
const RETRY_MAX_MS = 10_000;

/** HTTP status of a client-node ApiException (or of a Status object in its body). */
function httpStatusOf(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown; body?: { code?: unknown } };
  for (const v of [e?.code, e?.statusCode, e?.body?.code]) if (typeof v === 'number') return v;
  return undefined;
}

function reasonOf(err: unknown): string | undefined {
  const body = (err as { body?: unknown })?.body;
  const parsed = typeof body === 'string' ? (() => { try { return JSON.parse(body); } catch { return undefined; } })() : body;
  return (parsed as { reason?: string } | undefined)?.reason;
}

function unavailable(message: string, cause?: unknown): GatehouseError {
  return new GatehouseError('STORE_UNAVAILABLE', message, { cause });
}

/** Per apiserver request (a list of 50,000 CRs included); a write that waits longer fails with 503 STORE_UNAVAILABLE. */
const REQUEST_TIMEOUT_MS = 30_000;

export async function openKubernetesStore(options: KubernetesStoreOptions): Promise<KubernetesStore> {
  const { kubeConfig, namespace, logger } = options;
  const observeTimeoutMs = options.observeTimeoutMs ?? 10_000;
  const retryBaseMs = options.retryBaseMs ?? 500;
  const api = customObjectsApi(kubeConfig, REQUEST_TIMEOUT_MS);
  const path = (kind: AnyKind) => `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${kind.resource.plural}`;
  const target = (kind: AnyKind) => ({ group: GROUP, version: VERSION, namespace, plural: kind.resource.plural });

  let state: StoreState = Object.freeze({ revision: FIRST_REVISION, defs: { apis: [], oauthServers: [] }, hash: definitionsHash({ apis: [], oauthServers: [] }) });
  let verdicts = new Map<string, ResourceVerdict>();
  /** Accepted verdicts by `<CR kind>:<name>`, for the writes. */
  let acceptedByName = new Map<string, ResourceVerdict>();
  /** Per CR uid: the generation last accepted and the revision that first carried it. */
  const since = new Map<string, { generation: number; revision: number }>();
  /** Parsed specs, per uid and generation (status writes change neither). */
  const parsed = new Map<string, { generation: number; value: unknown; error: GatehouseError | null }>();
  const hashes = new Map<number, string>([[state.revision, state.hash]]);
  const queue = createUpdateQueue(logger);
  const resourceListeners = new Set<(changed: ReadonlySet<string> | null) => void>();
  const waiters = new Set<{ done: () => boolean; resolve: () => void }>();
  let passQueued = false;
  /** Set by anything but an update of a CR's status or metadata alone (generation unchanged): the next pass recompiles. */
  let rebuildNeeded = false;
  /** CRs updated since the last pass, by uid (the latest object). */
  const updated = new Map<string, CustomResource>();

  // ---- informers ---------------------------------------------------------------------------
  const informers = new Map<AnyKind, Informer<CustomResource> & ObjectCache<CustomResource>>();
  const health = new Map<AnyKind, { synced: boolean; failing: boolean; errors: number; retryMs: number; timer?: NodeJS.Timeout }>();

  /** (Re)starts one informer: a list when it has no resourceVersion (first start, 410 Gone), else a watch from it. */
  async function run(kind: AnyKind): Promise<void> {
    const h = health.get(kind)!;
    const errorsBefore = h.errors;
    try {
      await informers.get(kind)!.start();
    } catch (err) {
      onError(kind, err);
      return;
    }
    if (h.errors === errorsBefore) {
      h.failing = false;
      h.retryMs = retryBaseMs;
    }
  }

  function onError(kind: AnyKind, err: unknown): void {
    const h = health.get(kind)!;
    h.errors++;
    h.failing = true;
    if (queue.closed || h.timer) return;
    logger.warn({ err: String((err as Error)?.message ?? err), kind: kind.resource.kind, retryMs: h.retryMs }, 'kubernetes list/watch failed; retrying');
    // The cache, and so the served snapshot, is kept while the apiserver is away.
    h.timer = setTimeout(() => {
      h.timer = undefined;
      void run(kind);
    }, h.retryMs);
    h.retryMs = Math.min(h.retryMs * 2, RETRY_MAX_MS);
  }

  for (const kind of KINDS) {
    health.set(kind, { synced: false, failing: false, errors: 0, retryMs: retryBaseMs });
    const listFn = async () => {
      const list = await api.listNamespacedCustomObject(target(kind));
      // The informer replaces its cache right after this resolves: rebuild once it has.
      setImmediate(() => {
        health.get(kind)!.synced = true;
        queueRebuild();
      });
      return list as never;
    };
    const informer = makeInformer<CustomResource>(kubeConfig, path(kind), listFn);
    informer.on('add', queueRebuild);
    informer.on('update', (obj: CustomResource) => {
      updated.set(obj.metadata?.uid ?? '', obj);
      queuePass();
    });
    informer.on('delete', queueRebuild);
    informer.on('error', (err: unknown) => onError(kind, err));
    informers.set(kind, informer);
  }

  function queueRebuild(): void {
    rebuildNeeded = true;
    queuePass();
  }

  /**
   * One pass over what the informers delivered since the last: a recompile of the whole cache, or,
   * when every event was a status (or metadata) update, which changes no definition, only the
   * verdicts' statuses. Each admin write on a CR causes two or three status writes (the controller's),
   * which at 10,000 CRs each cost a whole recompile before.
   */
  function queuePass(): void {
    if (passQueued || queue.closed) return;
    passQueued = true;
    setImmediate(() => {
      passQueued = false;
      try {
        if (!rebuildNeeded && [...updated.values()].every((obj) => verdicts.get(obj.metadata?.uid ?? '')?.generation === (obj.metadata?.generation ?? 0))) {
          statusesChanged();
        } else {
          rebuildNeeded = false;
          updated.clear();
          rebuild();
        }
      } catch (err) {
        logger.error({ err }, 'kubernetes store rebuild failed');
      }
      for (const w of waiters) {
        if (w.done()) {
          waiters.delete(w);
          w.resolve();
        }
      }
    });
  }

  function parseCached(kind: AnyKind, obj: CustomResource): { value: unknown; error: GatehouseError | null } {
    const uid = obj.metadata?.uid ?? '';
    const generation = obj.metadata?.generation ?? 0;
    const hit = parsed.get(uid);
    if (hit && hit.generation === generation) return hit;
    let entry: { generation: number; value: unknown; error: GatehouseError | null };
    try {
      const spec = obj.spec ?? {};
      const field = kind.resource.nameField;
      entry = { generation, value: kind.parse({ ...spec, [field]: spec[field] ?? obj.metadata?.name }), error: null };
    } catch (err) {
      if (!(err instanceof GatehouseError)) throw err;
      entry = { generation, value: null, error: err };
    }
    parsed.set(uid, entry);
    return entry;
  }

  /** Older CRs win contested names and routes (Gateway API's rule); ties by kind and name, so every replica agrees. */
  function ranked(): Array<{ kind: AnyKind; obj: CustomResource }> {
    const all = KINDS.flatMap((kind) => informers.get(kind)!.list(namespace).map((obj) => ({ kind, obj, key: rankKey(kind, obj) })));
    return all.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  // parseCached keeps each CR's parsed definition per generation, so an unchanged one is never compiled again.
  const compileCache = createCompileCache();

  function statusesChanged(): void {
    const changed = new Set<string>();
    for (const [uid, obj] of updated) {
      const verdict = verdicts.get(uid);
      if (verdict && verdict.status !== obj.status) {
        verdict.status = obj.status;
        changed.add(uid);
      }
    }
    updated.clear();
    if (changed.size > 0) for (const listener of resourceListeners) listener(changed);
  }

  function rebuild(): void {
    const entries = ranked();
    const owners = new Map<string, string>();
    const defs: Required<Definitions> = { apis: [], oauthServers: [], basicAuthCredentials: [] };
    const ranks = new Map<string, number>();
    const next = new Map<string, ResourceVerdict>();
    const byName = new Map<string, ResourceVerdict>();
    const seenUids = new Set<string>();
    entries.forEach(({ kind, obj }, index) => {
      const uid = obj.metadata?.uid ?? '';
      seenUids.add(uid);
      const { value, error } = parseCached(kind, obj);
      const name = value !== null ? kind.nameOf(value as never) : String(obj.spec?.[kind.resource.nameField] ?? obj.metadata?.name ?? '');
      const verdict: ResourceVerdict = {
        resource: kind.resource,
        metadataName: obj.metadata?.name ?? '',
        uid,
        generation: obj.metadata?.generation ?? 0,
        name,
        error,
        sinceRevision: null,
        status: obj.status,
      };
      next.set(uid, verdict);
      if (error) return;
      const nameKey = `${kind.compileKind}:${name}`;
      const owner = owners.get(nameKey);
      if (owner !== undefined) {
        verdict.error = new GatehouseError(kind.nameTaken.code, `${kind.nameTaken.message}: ${kind.resource.kind} "${owner}" has spec.name "${name}"`, { field: 'name' });
        return;
      }
      owners.set(nameKey, verdict.metadataName);
      ranks.set(nameKey, index);
      byName.set(nameKey, verdict);
      (kind.list(defs) as unknown[]).push(value);
    });

    const compiled = compileDefinitions(defs, { rank: (k, n) => ranks.get(`${k}:${n}`) ?? 0, cache: compileCache });
    const rejected = new Set<string>();
    for (const r of compiled.rejected) {
      const key = `${r.kind}:${r.name}`;
      rejected.add(key);
      const verdict = byName.get(key);
      if (verdict) verdict.error = r.error;
    }
    const accepted: Definitions = {
      apis: defs.apis.filter((a) => !rejected.has(`api:${a.name}`)),
      oauthServers: defs.oauthServers.filter((s) => !rejected.has(`oauth-server:${s.name}`)),
      basicAuthCredentials: defs.basicAuthCredentials.filter((c) => !rejected.has(`basic-auth-credential:${c.username}`)),
    };
    const hash = definitionsHash(accepted);
    const changed = hash !== state.hash;
    if (changed) {
      state = Object.freeze({ revision: state.revision + 1, defs: accepted, hash });
      hashes.set(state.revision, hash);
      hashes.delete(state.revision - HISTORY);
    }

    const changedUids = new Set<string>();
    const names = new Map<string, ResourceVerdict>();
    for (const v of next.values()) {
      if (v.error) since.delete(v.uid);
      else {
        const seen = since.get(v.uid);
        if (!seen || seen.generation !== v.generation) since.set(v.uid, { generation: v.generation, revision: state.revision });
        v.sinceRevision = since.get(v.uid)!.revision;
        names.set(`${v.resource.kind}:${v.name}`, v);
      }
      if (!sameVerdict(verdicts.get(v.uid), v)) changedUids.add(v.uid);
    }
    for (const uid of [...since.keys()]) if (!seenUids.has(uid)) since.delete(uid);
    for (const uid of [...parsed.keys()]) if (!seenUids.has(uid)) parsed.delete(uid);
    verdicts = next;
    acceptedByName = names;
    for (const listener of resourceListeners) listener(changedUids);

    if (changed) {
      logger.info({ revision: state.revision, apis: accepted.apis.length, oauthServers: accepted.oauthServers.length, rejected: compiled.rejected.length }, 'definitions changed');
      queue.notify(state);
    }
  }

  // ---- start: wait for the first full list of both kinds -----------------------------------
  // A CP that cannot list must not serve an empty snapshot (data planes would drop every route).
  for (const kind of KINDS) void run(kind);
  await new Promise<void>((resolve) => {
    const check = () => ([...health.values()].every((h) => h.synced) || queue.closed ? resolve() : setTimeout(check, 10));
    check();
  });
  rebuild();
  logger.info({ namespace, revision: state.revision, apis: state.defs.apis.length, oauthServers: state.defs.oauthServers.length }, 'kubernetes store synced');

  // ---- writes ------------------------------------------------------------------------------
  function cached(kind: AnyKind, name: string): CustomResource | undefined {
    const v = acceptedByName.get(`${kind.resource.kind}:${name}`);
    return v ? informers.get(kind)!.get(v.metadataName, namespace) : undefined;
  }

  function observed(done: () => boolean): Promise<void> {
    if (done()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const waiter = {
        done,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        waiters.delete(waiter);
        reject(unavailable('the write was accepted by the Kubernetes API but this control plane has not seen it yet; retry the read'));
      }, observeTimeoutMs);
      waiters.add(waiter);
    });
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
  async function unlessSpecMoved<R>(kind: AnyKind, current: CustomResource, attempt: (metadata: CustomResource['metadata']) => Promise<R>): Promise<R> {
    try {
      return await attempt(current.metadata);
    } catch (err) {
      if (httpStatusOf(err) !== 409) throw err;
      const fresh = (await api.getNamespacedCustomObject({ ...target(kind), name: current.metadata!.name! })) as CustomResource;
      if (fresh.metadata?.uid !== current.metadata?.uid || JSON.stringify(fresh.spec) !== JSON.stringify(current.spec)) throw err;
      return attempt(fresh.metadata);
    }
  }

  async function write<T>(kind: AnyKind, before: T | undefined, after: T | undefined): Promise<void> {
    const nameOf = kind.nameOf as (def: T) => string;
    const informer = informers.get(kind)!;
    const body = (metadata: Record<string, unknown>, spec: T) => ({ apiVersion: API_VERSION, kind: kind.resource.kind, metadata, spec });
    try {
      if (!before && after) {
        const metadataName = metadataNameFor(nameOf(after));
        const created = (await api.createNamespacedCustomObject({ ...target(kind), body: body({ name: metadataName, namespace }, after) })) as CustomResource;
        const rv = created.metadata?.resourceVersion;
        await observed(() => informer.get(metadataName, namespace)?.metadata?.resourceVersion === rv || !sameUid(informer.get(metadataName, namespace), created));
      } else if (before && after) {
        const current = cached(kind, nameOf(before));
        if (!current) throw new GatehouseError(kind.notFound.code, kind.notFound.message);
        const metadataName = current.metadata!.name!;
        const replace = (metadata: CustomResource['metadata']) =>
          api.replaceNamespacedCustomObject({
            ...target(kind),
            name: metadataName,
            // resourceVersion = what this replica read: a change made meanwhile anywhere makes this a 409.
            body: body({ ...metadata }, after),
          }) as Promise<CustomResource>;
        const replaced = await unlessSpecMoved(kind, current, replace);
        const rv = replaced.metadata?.resourceVersion;
        await observed(() => informer.get(metadataName, namespace)?.metadata?.resourceVersion === rv || !sameUid(informer.get(metadataName, namespace), replaced));
      } else if (before && !after) {
        const current = cached(kind, nameOf(before));
        if (!current) throw new GatehouseError(kind.notFound.code, kind.notFound.message);
        const metadataName = current.metadata!.name!;
        await unlessSpecMoved(kind, current, (metadata) =>
          api.deleteNamespacedCustomObject({
            ...target(kind),
            name: metadataName,
            body: { preconditions: { uid: metadata!.uid, resourceVersion: metadata!.resourceVersion } },
          }),
        );
        await observed(() => !sameUid(informer.get(metadataName, namespace), current));
      }
    } catch (err) {
      if (err instanceof GatehouseError) throw err;
      translate(kind, err);
    }
  }

  /**
   * An admin write on one definition is one CR change. PUT /config and rollbacks are many, which
   * Kubernetes cannot make atomic: they run one by one in an order that leaves no dangling oauth2
   * reference in between (OAuth servers and users created or updated before APIs; APIs deleted
   * before servers), and the first failure stops the run with an error that says which changes
   * were applied and which were not.
   */
  async function apply(mutation: Mutation): Promise<UpdateResult> {
    const before = state.defs;
    const after = await mutation(before);
    if (definitionsHash(after) === state.hash) return { ...state, changed: false };
    const [apis, servers, users] = KINDS;
    const changes: Array<{ kind: AnyKind; prev: unknown; def: unknown; what: string }> = [];
    const plan = (kind: AnyKind, upserts: boolean) => {
      const nameOf = kind.nameOf as (def: unknown) => string;
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
        if (!prev || (prev !== def && JSON.stringify(prev) !== JSON.stringify(def))) changes.push({ kind, prev, def, what: label(prev ? 'update' : 'create', name) });
      }
    };
    for (const kind of [servers, users, apis]) plan(kind, true);
    for (const kind of [apis, servers, users]) plan(kind, false);
    for (const [index, change] of changes.entries()) {
      try {
        await write(change.kind, change.prev, change.def);
      } catch (err) {
        if (changes.length === 1 || !(err instanceof GatehouseError)) throw err;
        throw partiallyApplied(err, changes.slice(0, index).map((c) => c.what), changes.slice(index).map((c) => c.what));
      }
    }
    return { ...state, changed: true };
  }

  return {
    namespace,
    current: () => state,
    verdicts: () => verdicts,

    update: (mutation) => queue.update(() => apply(mutation)),
    subscribe: queue.subscribe,

    hashOfRevision: (revision) => hashes.get(revision),
    revisionOfHash(hash) {
      let found: number | undefined;
      for (const [revision, h] of hashes) if (h === hash) found = revision;
      return found;
    },

    subscribeResources(listener) {
      resourceListeners.add(listener);
      return () => resourceListeners.delete(listener);
    },

    async checkReady() {
      const failing = [...health.entries()].filter(([, h]) => h.failing || !h.synced).map(([k]) => k.resource.kind);
      if (failing.length > 0) throw unavailable(`kubernetes watch of ${failing.join(', ')} is failing`);
    },

    async patchStatus(resource, metadataName, status) {
      const kind = KINDS.find((k) => k.resource === resource)!;
      await api.replaceNamespacedCustomObjectStatus({
        ...target(kind),
        name: metadataName,
        body: statusBody(informers.get(kind)!.get(metadataName, namespace), status),
      });
    },

    async close() {
      await queue.close();
      for (const h of health.values()) clearTimeout(h.timer);
      for (const informer of informers.values()) await informer.stop();
      resourceListeners.clear();
      for (const w of waiters) w.resolve();
      waiters.clear();
    },
  };
}

const LISTED_CHANGES = 20;

/** The failed change's error, with what a multi-change write had applied before it and what it had not. */
function partiallyApplied(err: GatehouseError, applied: string[], notApplied: string[]): GatehouseError {
  const list = (items: string[]) => (items.length > LISTED_CHANGES ? `${items.slice(0, LISTED_CHANGES).join(', ')} and ${items.length - LISTED_CHANGES} more` : items.join(', ') || 'none');
  return new GatehouseError(err.code, `${err.message} (partially applied: ${applied.length} of ${applied.length + notApplied.length} changes done: ${list(applied)}; not applied: ${list(notApplied)})`, {
    field: err.field,
    cause: err,
  });
}

/** Whether a CR's new verdict would give it the same status as its previous one. */
function sameVerdict(a: ResourceVerdict | undefined, b: ResourceVerdict): boolean {
  return (
    a !== undefined &&
    a.generation === b.generation &&
    a.sinceRevision === b.sinceRevision &&
    a.status === b.status &&
    a.metadataName === b.metadataName &&
    a.error?.code === b.error?.code &&
    a.error?.message === b.error?.message
  );
}

/**
 * A CR's rank as one string (creation time, kind, name; NUL sorts below every character they hold, so
 * comparing these compares the three in turn), kept per object: the informer gives a new object per
 * change. Building the three-part keys in the comparator was 30 % of a whole pass at 10,000 CRs (--cpu-prof).
 */
const rankKeys = new WeakMap<CustomResource, string>();

function rankKey(kind: AnyKind, obj: CustomResource): string {
  let key = rankKeys.get(obj);
  if (key === undefined) rankKeys.set(obj, (key = `${String(obj.metadata?.creationTimestamp ?? '')}\0${kind.resource.kind}\0${obj.metadata?.name ?? ''}`));
  return key;
}

function sameUid(a: CustomResource | undefined, b: CustomResource): boolean {
  return a !== undefined && a.metadata?.uid === b.metadata?.uid;
}

/** PUT /status with the resourceVersion read: a concurrent change is a 409 and the controller retries next round. */
function statusBody(current: CustomResource | undefined, status: Record<string, unknown>): object {
  if (!current) throw unavailable('resource is gone');
  return { apiVersion: current.apiVersion, kind: current.kind, metadata: current.metadata, spec: current.spec, status };
}
