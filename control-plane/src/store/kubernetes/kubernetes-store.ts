/**
 * STORE=kubernetes: definitions are ApiDefinition / OAuthServer / BasicAuthCredential / KeyAuthCredential custom resources
 * in one namespace.
 *
 *   informers (list+watch, every kind) → cache → verdicts (parse + compileDefinitions, ranked by
 *   creation time) → accepted Definitions → StoreState (revision moves only with the content hash)
 *
 * Admin writes are turned into creates / updates / deletes of CRs with resourceVersion
 * preconditions (a lost race is a 409, never a silent overwrite), and resolve once this replica's
 * informer has seen them (read-your-writes). A CR that fails validation is left out of the
 * snapshot with its reason (the controller writes it to status); it never blocks the others.
 * Secrets are kept in Kubernetes Secrets the CRs reference (secret-refs.ts), watched like the CRs.
 * The revision is this replica's counter; the hash is the same on every replica for the same CRs.
 */
import { isDeepStrictEqual } from 'node:util';
import { CoreV1Api, KubeConfig, makeInformer, type Informer, type KubernetesObject, type ObjectCache, type V1Secret } from '@kubernetes/client-node';
import { customObjectsApi, kubernetesApi } from './api-client.js';
import { extractSecrets, managedSecretName, resolveSecretRefs, type SecretLookup } from './secret-refs.js';
import { compileCache } from '../compile-cache.js';
import { GatehouseError } from '#proto/errors';
import type { ApiDefinition, BasicAuthCredential, Definitions, KeyAuthCredential, OAuthServerDefinition } from '#proto/definition/index';
import { compileDefinitions, compileOne, type DefinitionKindName } from '#proto/compile/index';
import { applyChanges, configIndexOf, oauth2Refs, rememberConfigIndex, type ConfigIndex, type DefinitionChange } from '#proto/compile/incremental';
import { definitionsHash, deriveDefinitions, editsFrom, type DefinitionEdit } from '#proto/snapshot/codec';
import type { Logger } from '#proto/logger';
import type { DefinitionStore, Mutation, StoreState, UpdateResult } from '../index.js';
import { createUpdateQueue } from '../update-queue.js';
import { storedApis, storedBasicAuthCredentials, storedKeyAuthCredentials, storedOAuthServers, type StoredKind } from '../definition-kinds.js';
import { API_DEFINITION, API_VERSION, BASIC_AUTH_CREDENTIAL, GROUP, KEY_AUTH_CREDENTIAL, OAUTH_SERVER, VERSION, type ResourceKind } from './crds.js';
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
  { resource: KEY_AUTH_CREDENTIAL, ...storedKeyAuthCredentials } satisfies Kind<KeyAuthCredential>,
] as const;

type AnyKind = (typeof KINDS)[number];

/** The Secrets of the namespace, watched beside the CRs (secret-refs.ts). */
const SECRETS = { resource: { kind: 'Secret' } } as const;
type Watched = AnyKind | typeof SECRETS;

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
  const core = kubernetesApi(kubeConfig, REQUEST_TIMEOUT_MS, CoreV1Api);
  const path = (kind: AnyKind) => `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${kind.resource.plural}`;
  const target = (kind: AnyKind) => ({ group: GROUP, version: VERSION, namespace, plural: kind.resource.plural });

  let state: StoreState = Object.freeze({ revision: FIRST_REVISION, defs: { apis: [], oauthServers: [] }, hash: definitionsHash({ apis: [], oauthServers: [] }) });
  let verdicts = new Map<string, ResourceVerdict>();
  /** Accepted verdicts by `<CR kind>:<name>`, for the writes. */
  let acceptedByName = new Map<string, ResourceVerdict>();
  /** Per CR uid: the generation last accepted and the revision that first carried it. */
  const since = new Map<string, { generation: number; revision: number }>();
  /** Parsed specs, per uid and generation (status writes change neither) and the Secrets they read (`name@resourceVersion`). */
  const parsed = new Map<string, { generation: number; refs: string[]; value: unknown; error: GatehouseError | null }>();
  const hashes = new Map<number, string>([[state.revision, state.hash]]);
  const queue = createUpdateQueue(logger);
  const resourceListeners = new Set<(changed: ReadonlySet<string> | null) => void>();
  const waiters = new Set<{ done: () => boolean; resolve: () => void }>();
  let passQueued = false;
  /** Set when an informer (re)listed: the next pass looks at every CR. */
  let fullPassNeeded = false;
  /** CRs added, updated or deleted (null) since the last pass, by uid: the latest object of each. */
  const touched = new Map<string, { kind: AnyKind; obj: CustomResource | null }>();
  /** `<compile kind>:<name>` → uid of the CR holding that name (a CR whose spec parses holds its name, as in the full pass). */
  const nameOwners = new Map<string, string>();
  /** uid → the definition object an accepted CR contributes to state.defs. */
  const acceptedDefs = new Map<string, object>();
  /**
   * What the CRs refused because of another CR (a taken name or route, a missing OAuth server) stand
   * on: their uids, names, route keys and the servers they name. A change that touches any of it may
   * change who wins, which the CRs' ages decide: the full pass, which ranks them, takes it.
   */
  let blockers = noBlockers();

  // ---- informers ---------------------------------------------------------------------------
  const informers = new Map<AnyKind, Informer<CustomResource> & ObjectCache<CustomResource>>();
  const health = new Map<Watched, { synced: boolean; failing: boolean; errors: number; retryMs: number; timer?: NodeJS.Timeout }>();

  /** (Re)starts one informer: a list when it has no resourceVersion (first start, 410 Gone), else a watch from it. */
  async function run(kind: Watched): Promise<void> {
    const h = health.get(kind)!;
    const errorsBefore = h.errors;
    try {
      await ('list' in kind ? informers.get(kind)! : secretInformer).start();
    } catch (err) {
      onError(kind, err);
      return;
    }
    if (h.errors === errorsBefore) {
      h.failing = false;
      h.retryMs = retryBaseMs;
    }
  }

  function onError(kind: Watched, err: unknown): void {
    const h = health.get(kind)!;
    h.errors++;
    h.failing = true;
    if (queue.closed || h.timer) return;
    logger.warn({ err, kind: kind.resource.kind, retryMs: h.retryMs }, 'kubernetes list/watch failed; retrying');
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
        fullPassNeeded = true;
        queuePass();
      });
      return list as never;
    };
    const informer = makeInformer<CustomResource>(kubeConfig, path(kind), listFn);
    const touch = (obj: CustomResource, deleted: boolean) => {
      touched.set(obj.metadata?.uid ?? '', { kind, obj: deleted ? null : obj });
      queuePass();
    };
    informer.on('add', (obj: CustomResource) => touch(obj, false));
    informer.on('update', (obj: CustomResource) => touch(obj, false));
    informer.on('delete', (obj: CustomResource) => touch(obj, true));
    informer.on('error', (err: unknown) => onError(kind, err));
    informers.set(kind, informer);
  }

  health.set(SECRETS, { synced: false, failing: false, errors: 0, retryMs: retryBaseMs });
  const secretInformer = makeInformer<V1Secret>(kubeConfig, `/api/v1/namespaces/${namespace}/secrets`, async () => {
    const list = await core.listNamespacedSecret({ namespace });
    setImmediate(() => {
      health.get(SECRETS)!.synced = true;
      fullPassNeeded = true;
      queuePass();
    });
    return list as never;
  });
  const lookupSecret: SecretLookup = (name) => secretInformer.get(name, namespace);
  /** A Secret a CR reads changed: the full pass parses that CR again (its generation did not move). Any other: a pass, for writes waiting on it. */
  const secretChanged = (secret: V1Secret) => {
    const at = `${secret.metadata?.name ?? ''}@`;
    for (const entry of parsed.values()) {
      if (entry.refs.some((r) => r.startsWith(at))) {
        fullPassNeeded = true;
        break;
      }
    }
    queuePass();
  };
  for (const event of ['add', 'update', 'delete'] as const) secretInformer.on(event, secretChanged);
  secretInformer.on('error', (err: unknown) => onError(SECRETS, err));

  /**
   * One pass over what the informers delivered since the last: what the changed CRs change (pass()),
   * else a recompile of the whole cache (rebuild()), which grows with the CRs: every admin write causes three
   * passes (its own CR, then the status writes the controller makes).
   */
  function queuePass(): void {
    if (passQueued || queue.closed) return;
    passQueued = true;
    setImmediate(() => {
      passQueued = false;
      try {
        if (fullPassNeeded || !pass()) rebuild();
        fullPassNeeded = false;
        touched.clear();
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

  /** Each CR's parsed definition per generation: an unchanged CR keeps its object, so compileCache never compiles it again. */
  function parseCached(kind: AnyKind, obj: CustomResource): { value: unknown; error: GatehouseError | null } {
    const uid = obj.metadata?.uid ?? '';
    const generation = obj.metadata?.generation ?? 0;
    const hit = parsed.get(uid);
    const sameSecrets = (refs: string[]) => refs.every((r) => r === `${r.slice(0, r.lastIndexOf('@'))}@${lookupSecret(r.slice(0, r.lastIndexOf('@')))?.metadata?.resourceVersion ?? ''}`);
    if (hit && hit.generation === generation && sameSecrets(hit.refs)) return hit;
    let entry: { generation: number; refs: string[]; value: unknown; error: GatehouseError | null };
    const refs: string[] = [];
    try {
      const spec = resolveSecretRefs(kind.compileKind, obj.spec ?? {}, lookupSecret, refs);
      const field = kind.resource.nameField;
      entry = { generation, refs, value: kind.parse({ ...spec, [field]: spec[field] ?? obj.metadata?.name }), error: null };
    } catch (err) {
      if (!(err instanceof GatehouseError)) throw err;
      entry = { generation, refs, value: null, error: err };
    }
    parsed.set(uid, entry);
    return entry;
  }

  /** Older CRs win contested names and routes (Gateway API's rule); ties by kind and name, so every replica agrees. */
  function ranked(): Array<{ kind: AnyKind; obj: CustomResource }> {
    const all = KINDS.flatMap((kind) => informers.get(kind)!.list(namespace).map((obj) => ({ kind, obj, key: rankKey(kind, obj) })));
    return all.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }


  const generationOf = (obj: CustomResource) => obj.metadata?.generation ?? 0;

  function verdictOf(kind: AnyKind, obj: CustomResource, value: unknown, error: GatehouseError | null): ResourceVerdict {
    return {
      resource: kind.resource,
      metadataName: obj.metadata?.name ?? '',
      uid: obj.metadata?.uid ?? '',
      generation: generationOf(obj),
      name: value !== null ? kind.nameOf(value as never) : String(obj.spec?.[kind.resource.nameField] ?? obj.metadata?.name ?? ''),
      error,
      sinceRevision: null,
      status: obj.status,
    };
  }

  /**
   * The touched CRs applied to the current state, in what they change: a status update changes a
   * verdict's status only; a spec change, creation or deletion is checked against the index of the
   * accepted configuration (compile/incremental.ts, as admin writes are) and edits the definition
   * lists in place, so the hash and the data planes' delta cost what changed. That is the full pass's
   * result unless ranks decide (a CR refused because of another, before or after the change, and the
   * change touches what it stands on: see blockers) or the index is not at hand: false then, and
   * nothing changed.
   */
  function routeKeysOf(kind: DefinitionKindName, def: object | undefined): readonly string[] {
    const built = def && compileOne(kind, def, compileCache);
    return built && 'built' in built ? built.built.keys : [];
  }

  function blocks(kind: AnyKind, uid: string, name: string | undefined, routeKeys: readonly string[]): boolean {
    return (
      blockers.uids.has(uid) ||
      (name !== undefined && (blockers.names.has(`${kind.compileKind}:${name}`) || (kind.compileKind === 'oauth-server' && blockers.servers.has(name)))) ||
      routeKeys.some((key) => blockers.routeKeys.has(key))
    );
  }

  function pass(): boolean {
    const statusOnly: Array<[ResourceVerdict, CustomResource]> = [];
    const next: Array<{ uid: string; kind: AnyKind; verdict: ResourceVerdict | null; value: unknown }> = [];
    const changes: DefinitionChange[] = [];
    const edits: DefinitionEdit[] = [];
    const claims = new Map<string, string>();
    for (const [uid, { kind, obj }] of touched) {
      const prev = verdicts.get(uid);
      if (obj && prev && prev.generation === generationOf(obj)) {
        if (prev.status !== obj.status) statusOnly.push([prev, obj]);
        continue;
      }
      const prevDef = acceptedDefs.get(uid);
      if (blocks(kind, uid, prev?.name, routeKeysOf(kind.compileKind, prevDef))) return false;
      const removeOld = () => {
        changes.push({ kind: kind.compileKind, name: prev!.name });
        edits.push({ kind: kind.compileKind, before: prevDef });
      };
      if (!obj) {
        if (prevDef) removeOld();
        next.push({ uid, kind, verdict: null, value: null });
        continue;
      }
      const { value, error } = parseCached(kind, obj);
      const verdict = verdictOf(kind, obj, value, error);
      if (!error) {
        const key = `${kind.compileKind}:${verdict.name}`;
        const owner = claims.get(key) ?? nameOwners.get(key);
        if (owner !== undefined && owner !== uid) return false;
        claims.set(key, uid);
        const own = compileOne(kind.compileKind, value as object, compileCache);
        if ('error' in own) {
          if (!(own.error instanceof GatehouseError)) throw own.error;
          verdict.error = own.error;
        }
        if (blocks(kind, uid, verdict.name, routeKeysOf(kind.compileKind, value as object))) return false;
      }
      const sameName = prev?.name === verdict.name;
      if (prevDef && (verdict.error || !sameName)) removeOld();
      if (!verdict.error) {
        changes.push({ kind: kind.compileKind, name: verdict.name, def: value as object });
        edits.push({ kind: kind.compileKind, before: prevDef && sameName ? prevDef : undefined, after: value as object });
      }
      next.push({ uid, kind, verdict, value });
    }

    let defs = state.defs;
    if (changes.length > 0) {
      const index = configIndexOf(state.defs, compileCache);
      if (!index) return false;
      let nextIndex: ConfigIndex;
      try {
        nextIndex = applyChanges(index, changes, compileCache);
      } catch (err) {
        if (err instanceof GatehouseError) return false;
        throw err;
      }
      const edited = withEdits(state.defs, edits);
      if (!edited) return false;
      defs = edited;
      deriveDefinitions(state.defs, defs, edits);
      rememberConfigIndex(defs, nextIndex);
    }

    // Accepted: from here on nothing fails.
    const changed = new Set<string>();
    for (const [verdict, obj] of statusOnly) {
      verdict.status = obj.status;
      changed.add(verdict.uid);
    }
    const hashChanged = defs !== state.defs && setDefs(defs);
    for (const { uid, kind, verdict, value } of next) {
      const prev = verdicts.get(uid);
      if (prev) {
        const key = `${kind.compileKind}:${prev.name}`;
        if (nameOwners.get(key) === uid) nameOwners.delete(key);
        if (acceptedByName.get(`${kind.resource.kind}:${prev.name}`) === prev) acceptedByName.delete(`${kind.resource.kind}:${prev.name}`);
      }
      changed.add(uid);
      if (!verdict) {
        forget(uid);
        continue;
      }
      if (value !== null) nameOwners.set(`${kind.compileKind}:${verdict.name}`, uid);
      if (verdict.error) {
        since.delete(uid);
        acceptedDefs.delete(uid);
      } else {
        accept(verdict);
        acceptedDefs.set(uid, value as object);
        acceptedByName.set(`${kind.resource.kind}:${verdict.name}`, verdict);
      }
      verdicts.set(uid, verdict);
    }
    for (const listener of resourceListeners) listener(changed);
    if (hashChanged) published(0);
    return true;
  }

  /** The state holds `defs` from now on; a new revision when their content differs. Returns whether it does. */
  function setDefs(defs: Definitions): boolean {
    const hash = definitionsHash(defs);
    const changed = hash !== state.hash;
    // Replaced even when equal: acceptedDefs must name the objects in state.defs.
    state = Object.freeze({ revision: changed ? state.revision + 1 : state.revision, defs, hash });
    if (changed) {
      hashes.set(state.revision, hash);
      hashes.delete(state.revision - HISTORY);
    }
    return changed;
  }

  function published(rejected: number): void {
    logger.info({ revision: state.revision, apis: state.defs.apis.length, oauthServers: state.defs.oauthServers.length, rejected }, 'definitions changed');
    queue.notify(state);
  }

  /** An accepted verdict's revision: the first that carried its generation. */
  function accept(v: ResourceVerdict): void {
    const seen = since.get(v.uid);
    if (!seen || seen.generation !== v.generation) since.set(v.uid, { generation: v.generation, revision: state.revision });
    v.sinceRevision = since.get(v.uid)!.revision;
  }

  function forget(uid: string): void {
    verdicts.delete(uid);
    since.delete(uid);
    parsed.delete(uid);
    acceptedDefs.delete(uid);
  }

  function rebuild(): void {
    const entries = ranked();
    const owners = new Map<string, ResourceVerdict>();
    let defs: Definitions = { apis: [], oauthServers: [] };
    for (const kind of KINDS) defs = (kind as StoredKind<unknown>).withList(defs, []);
    const ranks = new Map<string, number>();
    const next = new Map<string, ResourceVerdict>();
    const values = new Map<string, object>();
    let nameTaken = 0;
    const blocked = noBlockers();
    const block = (kind: DefinitionKindName, verdict: ResourceVerdict, value: object) => {
      blocked.uids.add(verdict.uid);
      blocked.names.add(`${kind}:${verdict.name}`);
      for (const key of routeKeysOf(kind, value)) blocked.routeKeys.add(key);
      if (kind === 'api') for (const server of oauth2Refs(value)) blocked.servers.add(server);
    };
    entries.forEach(({ kind, obj }, index) => {
      const { value, error } = parseCached(kind, obj);
      const verdict = verdictOf(kind, obj, value, error);
      next.set(verdict.uid, verdict);
      if (error) return;
      const nameKey = `${kind.compileKind}:${verdict.name}`;
      const owner = owners.get(nameKey);
      if (owner !== undefined) {
        verdict.error = new GatehouseError(kind.nameTaken.code, `${kind.nameTaken.message}: ${kind.resource.kind} "${owner.metadataName}" has spec.name "${verdict.name}"`, { field: 'name' });
        nameTaken++;
        block(kind.compileKind, verdict, value as object);
        return;
      }
      owners.set(nameKey, verdict);
      ranks.set(nameKey, index);
      values.set(nameKey, value as object);
      (kind.list(defs) as unknown[]).push(value);
    });

    const compiled = compileDefinitions(defs, { rank: (k, n) => ranks.get(`${k}:${n}`) ?? 0, cache: compileCache });
    const rejected = new Set<string>();
    for (const r of compiled.rejected) {
      const key = `${r.kind}:${r.name}`;
      rejected.add(key);
      owners.get(key)!.error = r.error;
      // Refused for its own compile: nothing another CR does changes that.
      if (!('error' in compileOne(r.kind, values.get(key)!, compileCache))) block(r.kind, owners.get(key)!, values.get(key)!);
    }
    blockers = blocked;
    let accepted: Definitions = { apis: [], oauthServers: [] };
    for (const kind of KINDS as readonly StoredKind<unknown>[]) {
      accepted = kind.withList(accepted, kind.list(defs).filter((d) => !rejected.has(`${kind.compileKind}:${kind.nameOf(d)}`)));
    }
    const hashChanged = setDefs(accepted);

    const changed = new Set<string>();
    acceptedByName = new Map();
    nameOwners.clear();
    acceptedDefs.clear();
    for (const [key, verdict] of owners) {
      nameOwners.set(key, verdict.uid);
      if (!verdict.error) acceptedDefs.set(verdict.uid, values.get(key)!);
    }
    for (const v of next.values()) {
      if (v.error) since.delete(v.uid);
      else {
        accept(v);
        acceptedByName.set(`${v.resource.kind}:${v.name}`, v);
      }
      if (!sameVerdict(verdicts.get(v.uid), v)) changed.add(v.uid);
    }
    for (const uid of [...verdicts.keys()]) if (!next.has(uid)) changed.add(uid);
    for (const uid of [...since.keys()]) if (!next.has(uid)) since.delete(uid);
    for (const uid of [...parsed.keys()]) if (!next.has(uid)) parsed.delete(uid);
    verdicts = next;
    for (const listener of resourceListeners) listener(changed);
    if (hashChanged) published(compiled.rejected.length + nameTaken);
    // The next CR change (and admin write) is checked against this index: built now, not on that write's path
    // (indexConfig grows with the CRs).
    const built = state.defs;
    setImmediate(() => configIndexOf(built, compileCache));
  }

  // ---- start: wait for the first full list of both kinds -----------------------------------
  // A CP that cannot list must not serve an empty snapshot (data planes would drop every route).
  for (const kind of [...KINDS, SECRETS]) void run(kind);
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
    // The informer's cache holds an event before the pass that applies it has run (queued by that event).
    if (!passQueued && done()) return Promise.resolve();
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

  /**
   * Writes the Secret holding a CR's secrets (secret-refs.ts), owned by the CR, unless it already holds
   * exactly that; resolves once this replica has seen it and parsed the CRs that read it again.
   */
  async function putSecret(kind: AnyKind, owner: CustomResource, data: Record<string, string>): Promise<void> {
    const name = managedSecretName(kind.resource.singular, owner.metadata!.name!);
    const existing = lookupSecret(name);
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
    await observed(() => lookupSecret(name)?.metadata?.resourceVersion === rv);
  }

  /** The spec of `def` with its secrets as references, and the data of the CR's own Secret. */
  function specAndSecrets(kind: AnyKind, def: object, metadataName: string, current?: CustomResource) {
    return extractSecrets(kind.compileKind, def, current?.spec, lookupSecret, managedSecretName(kind.resource.singular, metadataName));
  }

  async function write<T>(kind: AnyKind, before: T | undefined, after: T | undefined): Promise<void> {
    const nameOf = kind.nameOf as (def: T) => string;
    const informer = informers.get(kind)!;
    const body = (metadata: Record<string, unknown>, spec: object) => ({ apiVersion: API_VERSION, kind: kind.resource.kind, metadata, spec });
    try {
      if (!before && after) {
        const metadataName = metadataNameFor(nameOf(after));
        const { spec, data } = specAndSecrets(kind, after, metadataName);
        // The CR first: creating it claims the name (a Secret written first could be another replica's, losing the race).
        const created = (await api.createNamespacedCustomObject({ ...target(kind), body: body({ name: metadataName, namespace }, spec) })) as CustomResource;
        const rv = created.metadata?.resourceVersion;
        try {
          await putSecret(kind, created, data);
        } catch (err) {
          await api.deleteNamespacedCustomObject({ ...target(kind), name: metadataName, body: { preconditions: { uid: created.metadata!.uid } } }).catch(() => {});
          throw err;
        }
        await observed(() => {
          // Not in the cache yet is not done: the informer has not seen the create.
          const seen = informer.get(metadataName, namespace);
          return seen !== undefined && (seen.metadata?.resourceVersion === rv || !sameUid(seen, created));
        });
      } else if (before && after) {
        const current = cached(kind, nameOf(before));
        if (!current) throw new GatehouseError(kind.notFound.code, kind.notFound.message);
        const metadataName = current.metadata!.name!;
        const { spec, data } = specAndSecrets(kind, after, metadataName, current);
        // Keys the CR reads now stay until it no longer does: the old spec never names a key the Secret lacks.
        const held = lookupSecret(managedSecretName(kind.resource.singular, metadataName))?.data ?? {};
        await putSecret(kind, current, { ...held, ...data });
        const replace = (metadata: CustomResource['metadata']) =>
          api.replaceNamespacedCustomObject({
            ...target(kind),
            name: metadataName,
            // resourceVersion = what this replica read: a change made meanwhile anywhere makes this a 409.
            body: body({ ...metadata }, spec),
          }) as Promise<CustomResource>;
        const replaced = await unlessSpecMoved(kind, current, replace);
        const rv = replaced.metadata?.resourceVersion;
        await observed(() => informer.get(metadataName, namespace)?.metadata?.resourceVersion === rv || !sameUid(informer.get(metadataName, namespace), replaced));
        await putSecret(kind, replaced, data);
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
    const [apis, servers, ...credentials] = KINDS;
    const changes: Array<{ kind: AnyKind; prev: unknown; def: unknown; what: string }> = [];
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
        if (!prev || (prev !== def && JSON.stringify(prev) !== JSON.stringify(def))) changes.push({ kind, prev, def, what: label(prev ? 'update' : 'create', name) });
      }
    };
    for (const kind of [servers, ...credentials, apis]) plan(kind, true);
    for (const kind of [apis, servers, ...credentials]) plan(kind, false);
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
      for (const informer of [...informers.values(), secretInformer]) await informer.stop();
      resourceListeners.clear();
      for (const w of waiters) w.resolve();
      waiters.clear();
    },
  };
}

const LISTED_CHANGES = 20;
const MANAGED_BY = 'app.kubernetes.io/managed-by';

/** The failed change's error, with what a multi-change write had applied before it and what it had not. */
function partiallyApplied(err: GatehouseError, applied: string[], notApplied: string[]): GatehouseError {
  const list = (items: string[]) => (items.length > LISTED_CHANGES ? `${items.slice(0, LISTED_CHANGES).join(', ')} and ${items.length - LISTED_CHANGES} more` : items.join(', ') || 'none');
  return new GatehouseError(err.code, `${err.message} (partially applied: ${applied.length} of ${applied.length + notApplied.length} changes done: ${list(applied)}; not applied: ${list(notApplied)})`, {
    field: err.field,
    cause: err,
  });
}

const noBlockers = () => ({ uids: new Set<string>(), names: new Set<string>(), routeKeys: new Set<string>(), servers: new Set<string>() });

/**
 * `defs` with `edits` made (pointers only): a replaced definition keeps its place, a removed one goes, an
 * added one goes last. Undefined when an edit's `before` is not in `defs` (then only the full pass can say).
 */
function withEdits(defs: Definitions, edits: readonly DefinitionEdit[]): Definitions | undefined {
  let out = defs;
  for (const kind of KINDS) {
    const mine = edits.filter((e) => e.kind === kind.compileKind);
    if (mine.length === 0) continue;
    // A copy edited at each edit's place (indexOf is native): cheaper than a Map lookup per element.
    let list = (kind.list(defs) as object[]).slice();
    const removed = new Set<object>();
    for (const e of mine) {
      if (!e.before) continue;
      const at = list.indexOf(e.before);
      if (at < 0) return undefined;
      if (e.after) list[at] = e.after;
      else removed.add(e.before);
    }
    if (removed.size > 0) list = list.filter((d) => !removed.has(d));
    for (const e of mine) if (!e.before && e.after) list.push(e.after);
    out = (kind.withList as (defs: Definitions, items: object[]) => Definitions)(out, list);
  }
  return out;
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
