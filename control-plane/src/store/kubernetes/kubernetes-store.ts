/**
 * STORE=kubernetes: definitions are ApiDefinition / OAuthServer / BasicAuthCredential / KeyAuthCredential custom resources
 * in one namespace. This file wires the parts:
 *
 *   informers.ts (list+watch, every kind, and the parse cache) → verdicts.ts (which CRs are accepted,
 *   ranked by creation time) → accepted Definitions → StoreState (revision moves only with the content hash)
 *
 *   writes.ts: admin writes → CRs + Secrets;  status.ts: the controller's status writes.
 *
 * Leader election, and the status controller that decides what a status says, are in controller/.
 * A CR that fails validation is left out of the snapshot with its reason (the controller writes it to
 * status); it never blocks the others. Secrets are kept in Kubernetes Secrets the CRs reference
 * (secret-refs.ts), watched like the CRs. The revision is this replica's counter; the hash is the same
 * on every replica for the same CRs.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '#proto/logger';
import type { DefinitionStore } from '../index.js';
import { createUpdateQueue } from '../update-queue.js';
import { createRateLimiter, customObjectsApi, kubernetesApi, statusWriter, type RateLimit } from './api-client.js';
import type { ResourceKind } from './crds.js';
import { ParseCache, startInformers } from './informers.js';
import { unavailable, type AnyKind, type CustomResource, type ResourceVerdict } from './kinds.js';
import { writeStatus } from './status.js';
import { Verdicts } from './verdicts.js';
import { applyMutation, type WriteContext } from './writes.js';

export type { CustomResource, ResourceVerdict } from './kinds.js';

export interface KubernetesStore extends DefinitionStore {
  /** Every CR's verdict, by uid. */
  verdicts(): ReadonlyMap<string, ResourceVerdict>;
  /** This replica's latest version with that content hash (bounded history), for reports of other replicas' data planes. */
  revisionOfHash(hash: string): number | undefined;
  hashOfRevision(revision: number): string | undefined;
  /** Called after every pass over the cache (any CR event, status writes included) with the uids whose verdict changed (null: any may have). */
  subscribeResources(listener: (changed: ReadonlySet<string> | null) => void): () => void;
  /** Replaces the status subresource (never the spec, so it cannot change a snapshot); a 409 when the CR changed since the informer saw it. */
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
  /** The client-side limit on this store's apiserver requests (none when unset). */
  rateLimit?: RateLimit;
}

/** Per apiserver request (a list of 50,000 CRs included); a write that waits longer fails with 503 STORE_UNAVAILABLE. */
const REQUEST_TIMEOUT_MS = 30_000;

export async function openKubernetesStore(options: KubernetesStoreOptions): Promise<KubernetesStore> {
  const { kubeConfig, namespace, logger } = options;
  const observeTimeoutMs = options.observeTimeoutMs ?? 10_000;
  const limiter = options.rateLimit && createRateLimiter(options.rateLimit);
  const api = customObjectsApi(kubeConfig, REQUEST_TIMEOUT_MS, limiter);
  const core = kubernetesApi(kubeConfig, REQUEST_TIMEOUT_MS, CoreV1Api, limiter);
  const write = statusWriter(kubeConfig, REQUEST_TIMEOUT_MS, limiter);
  const queue = createUpdateQueue(logger);
  const resourceListeners = new Set<(changed: ReadonlySet<string> | null) => void>();
  const waiters = new Set<{ done: () => boolean; resolve: () => void }>();
  let passQueued = false;
  /** Set when an informer (re)listed, or a Secret a CR reads changed: the next pass looks at every CR. */
  let fullPassNeeded = false;
  /** CRs added, updated or deleted (null) since the last pass, by uid: the latest object of each. */
  const touched = new Map<string, { kind: AnyKind; obj: CustomResource | null }>();

  const informers = startInformers({
    kubeConfig,
    namespace,
    api,
    core,
    logger,
    retryBaseMs: options.retryBaseMs ?? 500,
    events: {
      touched(kind, obj, deleted) {
        touched.set(obj.metadata?.uid ?? '', { kind, obj: deleted ? null : obj });
        queuePass();
      },
      relisted() {
        fullPassNeeded = true;
        queuePass();
      },
      // Any other Secret: a pass still, for writes waiting on it.
      secretChanged(secret) {
        if (parsed.reads(secret.metadata?.name ?? '')) fullPassNeeded = true;
        queuePass();
      },
      closed: () => queue.closed,
    },
  });
  const parsed = new ParseCache(informers.lookupSecret);
  const verdicts = new Verdicts({
    parsed,
    all: informers.all,
    changed: (uids) => {
      for (const listener of resourceListeners) listener(uids);
    },
    published(state, rejected) {
      logger.info({ revision: state.revision, apis: state.defs.apis.length, oauthServers: state.defs.oauthServers.length, rejected }, 'definitions changed');
      queue.notify(state);
    },
  });

  /**
   * One pass over what the informers delivered since the last: what the changed CRs change, else the
   * full pass, which grows with the CRs (every admin write causes three passes: its own CR, then the
   * status writes the controller makes).
   */
  function queuePass(): void {
    if (passQueued || queue.closed) return;
    passQueued = true;
    setImmediate(() => {
      passQueued = false;
      try {
        if (fullPassNeeded || !verdicts.pass(touched)) verdicts.rebuild();
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

  // A CP that cannot list must not serve an empty snapshot (data planes would drop every route).
  await informers.synced();
  verdicts.rebuild();
  const { state } = verdicts;
  logger.info({ namespace, revision: state.revision, apis: state.defs.apis.length, oauthServers: state.defs.oauthServers.length }, 'kubernetes store synced');

  const writes: WriteContext = { api, core, namespace, informers, verdicts, observed };
  return {
    namespace,
    current: () => verdicts.state,
    verdicts: () => verdicts.verdicts,

    update: (mutation) => queue.update(() => applyMutation(writes, mutation)),
    subscribe: queue.subscribe,

    hashOfRevision: (revision) => verdicts.hashOfRevision(revision),
    revisionOfHash: (hash) => verdicts.revisionOfHash(hash),

    subscribeResources(listener) {
      resourceListeners.add(listener);
      return () => resourceListeners.delete(listener);
    },

    async checkReady() {
      const failing = informers.failing();
      if (failing.length > 0) throw unavailable(`kubernetes watch of ${failing.join(', ')} is failing`);
    },

    patchStatus: (resource, metadataName, status) => writeStatus({ write, namespace, informers }, resource, metadataName, status),

    async close() {
      await queue.close();
      await informers.stop();
      resourceListeners.clear();
      for (const w of waiters) w.resolve();
      waiters.clear();
    },
  };
}
