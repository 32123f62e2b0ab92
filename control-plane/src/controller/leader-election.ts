/**
 * Lease-based leader election (coordination.k8s.io/v1), the client-go algorithm scaled down:
 * every `retryPeriod` a replica reads the Lease; it renews it when it holds it, and takes it over
 * when the holder has not renewed for `leaseDuration` as measured on this replica's own clock (so
 * clock skew between replicas does not matter). A leader that cannot renew within `renewDeadline`
 * steps down before anyone may take over; on close it releases the Lease so a successor need not wait.
 *
 * Leases go through the CustomObjectsApi as plain JSON: client-node's typed Lease serialises
 * MicroTime with milliseconds, which the apiserver's RFC3339Micro parser refuses.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { customObjectsApi } from '../store/kubernetes/api-client.js';
import type { Logger } from '#proto/logger';

export interface LeaderElector {
  isLeader(): boolean;
  identity: string;
  /** Steps down and releases the Lease (a successor takes over at its next retry). */
  close(): Promise<void>;
}

export interface LeaderElectionOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  leaseName: string;
  identity: string;
  leaseDurationMs: number;
  logger: Logger;
  onChange(leading: boolean): void;
  now?: () => number;
}

interface Lease {
  metadata: { name: string; namespace: string; resourceVersion?: string };
  spec: {
    holderIdentity?: string | null;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

const LEASES = { group: 'coordination.k8s.io', version: 'v1', plural: 'leases' };

/** RFC3339 with exactly six fractional digits (metav1.MicroTime). */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export function startLeaderElection(options: LeaderElectionOptions): LeaderElector {
  const { kubeConfig, namespace, leaseName, identity, leaseDurationMs, logger, onChange } = options;
  const now = options.now ?? Date.now;
  const retryMs = Math.max(100, Math.floor(leaseDurationMs / 5));
  const renewDeadlineMs = Math.floor((leaseDurationMs * 2) / 3);
  // As client-go's renew timeout: a request that hangs fails by the renew deadline, so the leader steps down in time.
  const api = customObjectsApi(kubeConfig, renewDeadlineMs);
  const durationSeconds = Math.max(1, Math.ceil(leaseDurationMs / 1000));

  let leading = false;
  let lastRenewedAt = 0;
  /** The holder/renewTime last read, and when this replica first saw it. */
  let observed: { key: string; at: number } | null = null;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;

  function setLeading(value: boolean): void {
    if (value === leading) return;
    leading = value;
    logger.info({ identity, lease: leaseName }, value ? 'became leader' : 'stopped leading');
    onChange(value);
  }

  function spec(previous: Lease['spec'] | undefined, t: number): Lease['spec'] {
    const holding = previous?.holderIdentity === identity;
    return {
      holderIdentity: identity,
      leaseDurationSeconds: durationSeconds,
      acquireTime: holding && previous?.acquireTime ? previous.acquireTime : microTime(t),
      renewTime: microTime(t),
      leaseTransitions: (previous?.leaseTransitions ?? 0) + (holding || !previous?.holderIdentity ? 0 : 1),
    };
  }

  async function tryAcquireOrRenew(): Promise<void> {
    const t = now();
    let lease: Lease | null;
    try {
      lease = (await api.getNamespacedCustomObject({ ...LEASES, namespace, name: leaseName })) as Lease;
    } catch (err) {
      if ((err as { code?: number }).code !== 404) throw err;
      lease = null;
    }
    if (!lease) {
      await api.createNamespacedCustomObject({
        ...LEASES,
        namespace,
        body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: leaseName, namespace }, spec: spec(undefined, t) },
      });
      lastRenewedAt = t;
      return setLeading(true);
    }
    const holder = lease.spec.holderIdentity ?? '';
    const key = `${holder}|${lease.spec.renewTime ?? ''}`;
    if (observed?.key !== key) observed = { key, at: t };
    const heldByOther = holder !== '' && holder !== identity;
    const expired = t - observed.at > (lease.spec.leaseDurationSeconds ?? durationSeconds) * 1000;
    if (heldByOther && !expired) return setLeading(false);
    // resourceVersion: two replicas taking over at once → one gets a 409 and stays a follower.
    await api.replaceNamespacedCustomObject({
      ...LEASES,
      namespace,
      name: leaseName,
      body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: lease.metadata, spec: spec(lease.spec, t) },
    });
    lastRenewedAt = t;
    setLeading(true);
  }

  async function loop(): Promise<void> {
    if (closed) return;
    try {
      await tryAcquireOrRenew();
    } catch (err) {
      const code = (err as { code?: number }).code;
      if (code !== 409) logger.warn({ err, lease: leaseName }, 'lease renewal failed');
      if (leading && (code === 409 || now() - lastRenewedAt > renewDeadlineMs)) setLeading(false);
    }
    if (!closed) timer = setTimeout(() => void loop(), retryMs);
  }
  void loop();

  return {
    identity,
    isLeader: () => leading,
    async close() {
      closed = true;
      clearTimeout(timer);
      if (!leading) return;
      setLeading(false);
      try {
        const lease = (await api.getNamespacedCustomObject({ ...LEASES, namespace, name: leaseName })) as Lease;
        if (lease.spec.holderIdentity !== identity) return;
        await api.replaceNamespacedCustomObject({
          ...LEASES,
          namespace,
          name: leaseName,
          body: { ...lease, spec: { ...lease.spec, holderIdentity: null, leaseDurationSeconds: 1, renewTime: microTime(now()) } },
        });
      } catch (err) {
        logger.warn({ err }, 'lease release failed');
      }
    },
  };
}
