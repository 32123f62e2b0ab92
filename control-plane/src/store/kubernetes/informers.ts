/**
 * The Kubernetes store's view of the cluster: one informer (list + watch, with its cache) per CR kind
 * and one for the namespace's Secrets, each restarted with backoff when its list or watch fails (the
 * cache, and so the served snapshot, is kept meanwhile); and the parse cache, each CR's spec parsed
 * once per generation and per version of the Secrets it reads.
 */
import { makeInformer, type CoreV1Api, type CustomObjectsApi, type Informer, type KubeConfig, type ObjectCache, type V1Secret } from '@kubernetes/client-node';
import { GatehouseError } from '#proto/errors';
import type { Logger } from '#proto/logger';
import type { OAuthServerDefinition } from '#proto/definition/index';
import { checkHmacKeyLengths } from '../definition-kinds.js';
import { GROUP, VERSION } from './crds.js';
import { KINDS, crTarget, type AnyKind, type CustomResource } from './kinds.js';
import { resolveSecretRefs, type SecretLookup } from './secret-refs.js';

/**
 * What the caches keep of an object: not metadata.managedFields, which every write (status writes
 * included) grows and nothing here reads; a replace sent without it leaves the server's untouched.
 * Done in place as the object arrives (list, or watch event before its handlers run further), as
 * controller-runtime's TransformStripManagedFields does. Annotations stay: a replace sends them back.
 */
export function stripForCache<T extends { metadata?: { managedFields?: unknown } }>(obj: T): T {
  if (obj.metadata?.managedFields !== undefined) delete obj.metadata.managedFields;
  internRepeated(obj as CachedObject);
  return obj;
}

interface CachedObject {
  metadata?: Record<string, unknown>;
  status?: unknown;
}

/**
 * One copy of each string many cached objects repeat: apiVersion, kind, namespace, creation times (CRs
 * created together share them) and the status conditions the controller writes (the same types, reasons,
 * messages and transition times on thousands of CRs). JSON.parse gives every object its own copies: about
 * 300 bytes a CR. Bounded: the table starts over when full.
 */
const interned = new Map<string, string>();
const INTERNED_MAX = 4096;

function intern(value: string): string {
  const known = interned.get(value);
  if (known !== undefined) return known;
  if (interned.size >= INTERNED_MAX) interned.clear();
  interned.set(value, value);
  return value;
}

/** The strings of `record`'s `keys` (all of them: undefined), objects and arrays walked, in place. */
function internIn(record: Record<string, unknown>, keys?: readonly string[]): void {
  for (const key of keys ?? Object.keys(record)) {
    const value = record[key];
    if (typeof value === 'string') record[key] = intern(value);
    else if (keys === undefined && value !== null && typeof value === 'object') internIn(value as Record<string, unknown>);
  }
}

function internRepeated(obj: CachedObject): void {
  internIn(obj as Record<string, unknown>, ['apiVersion', 'kind']);
  if (obj.metadata) internIn(obj.metadata, ['namespace', 'creationTimestamp']);
  if (obj.status !== null && typeof obj.status === 'object') internIn(obj.status as Record<string, unknown>);
}

/** Objects per list request, as client-go's reflector pages: the list of 10,000 CRs is never one response held whole. */
const PAGE = 500;

interface ListPage {
  items?: unknown[];
  /** `continue` as the apiserver sends it; `_continue` once client-node has deserialised a typed list. */
  metadata?: { resourceVersion?: string; continue?: string; _continue?: string };
}

/** Every page of a list (one consistent snapshot: the continue token pins its resourceVersion), each object stripped as it comes. */
async function listInPages(page: (token: string | undefined) => Promise<ListPage>): Promise<ListPage> {
  const items: unknown[] = [];
  let last: ListPage;
  let token: string | undefined;
  do {
    last = await page(token);
    for (const item of last.items ?? []) items.push(stripForCache(item as CustomResource));
    token = last.metadata?.continue || last.metadata?._continue || undefined;
  } while (token);
  return { ...last, items };
}

/** Watches are cheap to retry; a long cap would only delay recovery after an apiserver restart. */
const RETRY_MAX_MS = 10_000;

export type CrInformer = Informer<CustomResource> & ObjectCache<CustomResource>;

/** What the informers tell the store. */
export interface InformerEvents {
  /** A CR was added, updated or deleted. */
  touched(kind: AnyKind, obj: CustomResource, deleted: boolean): void;
  /** An informer has listed (first start, 410 Gone): its cache was replaced, so any CR may have changed. */
  relisted(): void;
  /** A Secret of the namespace was added, updated or deleted. */
  secretChanged(secret: V1Secret): void;
  /** The store is closing: no more restarts. */
  closed(): boolean;
}

export interface StoreInformers {
  crs(kind: AnyKind): CrInformer;
  /** Every CR of every kind in the caches. */
  all(): Array<{ kind: AnyKind; obj: CustomResource }>;
  lookupSecret: SecretLookup;
  /** Resolves once every informer has listed (or the store closed). */
  synced(): Promise<void>;
  /** The kinds whose list or watch is failing or has not listed yet. */
  failing(): string[];
  stop(): Promise<void>;
}

/** One informer and its health. */
interface Watched {
  label: string;
  informer: Informer<CustomResource | V1Secret>;
  synced: boolean;
  failing: boolean;
  errors: number;
  retryMs: number;
  timer?: NodeJS.Timeout;
}

interface Retry {
  baseMs: number;
  logger: Logger;
  events: InformerEvents;
}

/** (Re)starts one informer: a list when it has no resourceVersion (first start, 410 Gone), else a watch from it. */
async function run(w: Watched, retry: Retry): Promise<void> {
  const errorsBefore = w.errors;
  try {
    await w.informer.start();
  } catch (err) {
    failed(w, err, retry);
    return;
  }
  if (w.errors === errorsBefore) {
    w.failing = false;
    w.retryMs = retry.baseMs;
  }
}

function failed(w: Watched, err: unknown, retry: Retry): void {
  w.errors++;
  w.failing = true;
  if (retry.events.closed() || w.timer) return;
  retry.logger.warn({ err, kind: w.label, retryMs: w.retryMs }, 'kubernetes list/watch failed; retrying');
  w.timer = setTimeout(() => {
    w.timer = undefined;
    void run(w, retry);
  }, w.retryMs);
  w.retryMs = Math.min(w.retryMs * 2, RETRY_MAX_MS);
}

export function startInformers(options: {
  kubeConfig: KubeConfig;
  namespace: string;
  api: CustomObjectsApi;
  core: CoreV1Api;
  logger: Logger;
  retryBaseMs: number;
  events: InformerEvents;
}): StoreInformers {
  const { kubeConfig, namespace, api, core, events } = options;
  const retry: Retry = { baseMs: options.retryBaseMs, logger: options.logger, events };
  const watched: Watched[] = [];
  const crs = new Map<AnyKind, CrInformer>();
  const watch = (label: string, informer: Informer<CustomResource | V1Secret>): Watched => {
    const w: Watched = { label, informer, synced: false, failing: false, errors: 0, retryMs: retry.baseMs };
    informer.on('error', (err: unknown) => failed(w, err, retry));
    watched.push(w);
    return w;
  };
  /** The list an informer starts from; it replaces its cache right after this resolves: the store looks again once it has. */
  const listed = <T>(w: () => Watched | undefined, list: Promise<T>): Promise<T> =>
    list.then((result) => {
      setImmediate(() => {
        w()!.synced = true;
        events.relisted();
      });
      return result;
    });

  for (const kind of KINDS) {
    const target = crTarget(namespace, kind);
    let w: Watched | undefined;
    const informer = makeInformer<CustomResource>(
      kubeConfig,
      `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${kind.resource.plural}`,
      () =>
        listed(
          () => w,
          listInPages((_continue) => api.listNamespacedCustomObject({ ...target, limit: PAGE, _continue })),
        ) as never,
    );
    informer.on('add', (obj: CustomResource) => events.touched(kind, stripForCache(obj), false));
    informer.on('update', (obj: CustomResource) => events.touched(kind, stripForCache(obj), false));
    informer.on('delete', (obj: CustomResource) => events.touched(kind, obj, true));
    w = watch(kind.resource.kind, informer as Informer<CustomResource | V1Secret>);
    crs.set(kind, informer);
  }
  let secretsWatched: Watched | undefined;
  const secrets = makeInformer<V1Secret>(
    kubeConfig,
    `/api/v1/namespaces/${namespace}/secrets`,
    () =>
      listed(
        () => secretsWatched,
        listInPages((_continue) => core.listNamespacedSecret({ namespace, limit: PAGE, _continue })),
      ) as never,
  );
  for (const event of ['add', 'update'] as const) secrets.on(event, (secret: V1Secret) => events.secretChanged(stripForCache(secret)));
  secrets.on('delete', events.secretChanged);
  secretsWatched = watch('Secret', secrets as Informer<CustomResource | V1Secret>);

  for (const w of watched) void run(w, retry);
  return {
    crs: (kind) => crs.get(kind)!,
    all: () =>
      KINDS.flatMap((kind) =>
        crs
          .get(kind)!
          .list(namespace)
          .map((obj) => ({ kind, obj })),
      ),
    lookupSecret: (name) => secrets.get(name, namespace),
    synced: () =>
      new Promise<void>((resolve) => {
        const check = () => (watched.every((w) => w.synced) || events.closed() ? resolve() : setTimeout(check, 10));
        check();
      }),
    failing: () => watched.filter((w) => w.failing || !w.synced).map((w) => w.label),
    async stop() {
      for (const w of watched) clearTimeout(w.timer);
      for (const w of watched) await w.informer.stop();
    },
  };
}

interface Parsed {
  generation: number;
  /** The Secrets the spec read, as `name@resourceVersion`. */
  refs: string[];
  value: unknown;
  error: GatehouseError | null;
}

/**
 * Each CR's parsed definition per uid and generation (a status write changes neither) and the Secrets
 * it read: an unchanged CR keeps its object, so compileCache never compiles it again.
 */
export class ParseCache {
  private readonly entries = new Map<string, Parsed>();

  constructor(private readonly lookupSecret: SecretLookup) {}

  parse(kind: AnyKind, obj: CustomResource): { value: unknown; error: GatehouseError | null } {
    const uid = obj.metadata?.uid ?? '';
    const generation = obj.metadata?.generation ?? 0;
    const hit = this.entries.get(uid);
    if (hit && hit.generation === generation && hit.refs.every((r) => this.stillReads(r))) return hit;
    let entry: Parsed;
    const refs: string[] = [];
    try {
      const spec = resolveSecretRefs(kind.compileKind, obj.spec ?? {}, this.lookupSecret, refs);
      const field = kind.resource.nameField;
      const value = kind.parse({ ...spec, [field]: spec[field] ?? obj.metadata?.name });
      // An applied CR is a write: held to what admin writes are (its keys may have come from Secrets just now).
      if (kind.compileKind === 'oauth-server') checkHmacKeyLengths(value as OAuthServerDefinition);
      entry = { generation, refs, value, error: null };
    } catch (err) {
      if (!(err instanceof GatehouseError)) throw err;
      entry = { generation, refs, value: null, error: err };
    }
    this.entries.set(uid, entry);
    return entry;
  }

  /** Whether some parsed CR read the Secret `name` (its change must parse that CR again: its generation did not move). */
  reads(name: string): boolean {
    const at = `${name}@`;
    for (const entry of this.entries.values()) if (entry.refs.some((r) => r.startsWith(at))) return true;
    return false;
  }

  forget(uid: string): void {
    this.entries.delete(uid);
  }

  /** Drops the CRs no longer in the caches. */
  keepOnly(uids: ReadonlyMap<string, unknown>): void {
    for (const uid of [...this.entries.keys()]) if (!uids.has(uid)) this.entries.delete(uid);
  }

  /** `name@resourceVersion` still names the Secret's current version. */
  private stillReads(ref: string): boolean {
    const name = ref.slice(0, ref.lastIndexOf('@'));
    return ref === `${name}@${this.lookupSecret(name)?.metadata?.resourceVersion ?? ''}`;
  }
}
