/**
 * Upstream health checks (`proxy.upstreams.health_check`), per data-plane process:
 *
 * | part      | counts as a failure                                       | out after                     | back after                                                   |
 * |-----------|-----------------------------------------------------------|-------------------------------|--------------------------------------------------------------|
 * | `active`  | a probe (`GET`/`HEAD <origin><path>`) without a healthy   | `unhealthy_threshold` in a row | `healthy_threshold` good probes in a row                     |
 * |           | status (`statuses`, else 2xx/3xx) in time; with `grpc`, a  |                                |                                                               |
 * |           | Health/Check call not answered SERVING (grpc-health.ts)    |                                |                                                               |
 * | `passive` | a proxied attempt without response, or a failing status    | `unhealthy_threshold` in a row | with `active`: the probes as above; without: `ejection`       |
 * |           | (`statuses`, else 502 / 503 / 504); a gRPC call answered   |                                |                                                               |
 * |           | Trailers-Only UNAVAILABLE counts as a 503 (Envoy's mapping) |                                |                                                               |
 *
 * A target starts healthy. The balancer (routing/balancer.ts) skips unhealthy targets, and uses them
 * all when none is healthy: a guessed-wrong health path must not turn every request into a 503.
 * One TargetHealth serves every route of a snapshot with the same origin, pool settings and check,
 * so 1,000 APIs in front of one service probe it once per interval, not 1,000 times; a passive
 * failure seen by one of them counts for all. Kept across snapshots while that key is unchanged
 * (route-state.ts, as cb's breakers).
 */
import type { CompiledTarget } from '#proto/compile/index';
import { GRPC_STATUS } from '#proto/errors';
import { NO_GRPC_STATUS } from '#proto/plugins/index';
import { fixedAuthority } from '#proto/compile/index';
import type { HealthCheckDefinition } from '#proto/definition/types';
import { parseDuration } from '#proto/duration';
import type { Logger } from '#proto/logger';
import { Gauge, type Registry } from 'prom-client';
import type { PoolOptions, UpstreamPools } from '../proxy/upstream-pools.js';
import { RouteStateRegistry } from '../route-state.js';
import { withDeadline } from '../with-deadline.js';
import type { Dispatcher } from 'undici';
import { HEALTH_CHECK_PATH, healthCheckRequest, servingStatus } from './grpc-health.js';

/** What a probe asks of a target: `request` as sent, `healthy` the statuses that count as good (null: 2xx and 3xx). */
export interface ProbeRequest {
  origin: string;
  path: string;
  method: 'GET' | 'HEAD';
  /** `active.grpc`: the service asked for by gRPC's health protocol instead (path and method unused); null for an HTTP probe. */
  grpcService: string | null;
  /** Lower-case names: Host (the target's, unless the check gives one), User-Agent, the check's. */
  headers: Record<string, string>;
  healthy: ReadonlySet<number> | null;
  timeoutMs: number;
  pool: PoolOptions;
}

/** A probe's verdict: null when the target answered a healthy status in time, else why not. */
export type Probe = (request: ProbeRequest) => Promise<string | null>;

/** Proxied attempts that say the target cannot serve by default (0: no response at all, which always counts). */
const PASSIVE_FAILURES = [502, 503, 504];

interface Settings {
  active?: {
    path: string;
    method: 'GET' | 'HEAD';
    grpcService: string | null;
    /** What the logs call the probe: its path, or the gRPC service asked for. */
    name: string;
    headers: Record<string, string>;
    statuses: ReadonlySet<number> | null;
    intervalMs: number;
    timeoutMs: number;
    healthy: number;
    unhealthy: number;
  };
  passive?: { unhealthy: number; ejectionMs: number; failures: ReadonlySet<number> };
}

const count = (n: number, noun: string) => `${n} ${noun}${n === 1 ? '' : 's'}`;

function settingsOf(check: HealthCheckDefinition, host: string): Settings {
  const { active, passive } = check;
  const extra = Object.entries(active?.headers ?? {}).map(([name, value]) => [name.toLowerCase(), value]);
  return {
    active: active && {
      path: active.grpc ? HEALTH_CHECK_PATH : active.path!,
      method: active.method ?? 'GET',
      grpcService: active.grpc ? active.grpc.service : null,
      name: active.grpc ? `the gRPC health of "${active.grpc.service}"` : active.path!,
      headers: { host, 'user-agent': 'gatehouse-health-check', ...Object.fromEntries(extra) },
      statuses: active.statuses ? new Set(active.statuses) : null,
      intervalMs: parseDuration(active.interval),
      timeoutMs: parseDuration(active.timeout),
      healthy: active.healthy_threshold,
      unhealthy: active.unhealthy_threshold,
    },
    passive: passive && {
      unhealthy: passive.unhealthy_threshold,
      ejectionMs: parseDuration(passive.ejection),
      failures: new Set([0, ...(passive.statuses ?? PASSIVE_FAILURES)]),
    },
  };
}

/** One target's health under one check; `healthy` is read by the balancer on every pick. */
export class TargetHealth {
  healthy = true;
  private probeFailures = 0;
  private probeSuccesses = 0;
  private passiveFailures = 0;
  private timer: NodeJS.Timeout | null = null;
  private running = false;

  constructor(
    readonly origin: string,
    private readonly pool: PoolOptions,
    private readonly settings: Settings,
    private readonly probe: Probe,
    private readonly logger: Logger | undefined,
  ) {}

  /** Starts the probes (active checks): the first after a random part of the interval, so targets are not all probed at once. */
  start(): void {
    if (this.running) return;
    this.running = true;
    if (this.settings.active) this.schedule(Math.random() * this.settings.active.intervalMs);
  }

  stop(): void {
    this.running = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  /** A proxied attempt's status (0 without a response) and gRPC status (outcome-status.ts); counts only with a passive check. */
  observe(status: number, grpcStatus: number = NO_GRPC_STATUS): void {
    const passive = this.settings.passive;
    if (!passive || !this.healthy) return;
    const unavailable = grpcStatus === GRPC_STATUS.UNAVAILABLE;
    if (!passive.failures.has(unavailable ? 503 : status)) {
      this.passiveFailures = 0;
      return;
    }
    if (++this.passiveFailures < passive.unhealthy) return;
    const last = unavailable ? 'grpc-status 14 (UNAVAILABLE)' : status === 0 ? 'no response' : status;
    this.down(`${count(this.passiveFailures, 'proxied request')} failed in a row (the last: ${last})`);
    // Without probes, nothing else would ever bring it back.
    if (!this.settings.active && this.running)
      this.timer = setTimeout(() => this.up(`its ejection of ${passive.ejectionMs} ms ended`), passive.ejectionMs).unref();
  }

  private schedule(delayMs: number): void {
    this.timer = setTimeout(() => void this.runProbe(), delayMs).unref();
  }

  private async runProbe(): Promise<void> {
    const active = this.settings.active!;
    const { path, method, grpcService, headers, statuses: healthy, timeoutMs } = active;
    const failure = await this.probe({ origin: this.origin, path, method, grpcService, headers, healthy, timeoutMs, pool: this.pool }).catch((err: unknown) =>
      err instanceof Error ? err.message : String(err),
    );
    if (!this.running) return;
    if (failure === null) {
      this.probeFailures = 0;
      if (!this.healthy && ++this.probeSuccesses >= active.healthy) this.up(`${count(this.probeSuccesses, 'probe')} of ${active.name} succeeded in a row`);
    } else {
      this.probeSuccesses = 0;
      if (this.healthy && ++this.probeFailures >= active.unhealthy)
        this.down(`${count(this.probeFailures, 'probe')} of ${active.name} failed in a row (the last: ${failure})`);
    }
    this.schedule(active.intervalMs);
  }

  private down(reason: string): void {
    this.healthy = false;
    this.reset();
    this.logger?.warn({ target: this.origin, reason }, 'upstream target unhealthy');
  }

  private up(reason: string): void {
    this.healthy = true;
    this.reset();
    this.logger?.info({ target: this.origin, reason }, 'upstream target healthy again');
  }

  private reset(): void {
    this.probeFailures = 0;
    this.probeSuccesses = 0;
    this.passiveFailures = 0;
  }
}

/** The health checks of one snapshot being built (route-state.ts); `commit` (after the swap) starts the new ones and stops those no route uses any more. */
export interface HealthGeneration {
  /** The health of `target` under `check` for route `routeId`: the previous snapshot's when origin, pool settings and check are unchanged. */
  get(routeId: string, target: CompiledTarget, check: HealthCheckDefinition, pool: PoolOptions): TargetHealth;
  release(routeId: string): void;
  releaseAll(): void;
  commit(): void;
}

export interface HealthRegistry {
  begin(): HealthGeneration;
  /** Stops every check (shutdown). */
  stop(): void;
}

/** A probe through the proxy's upstream pools: the route's TLS mode and dial timeout apply, as to its requests. */
export function poolProbe(pools: UpstreamPools): Probe {
  return async ({ origin, path, method, grpcService, headers, healthy, timeoutMs, pool }) => {
    try {
      return await withDeadline(
        timeoutMs,
        () => new Error(`no answer within ${timeoutMs} ms`),
        async (signal) => {
          const request = { path, headers, signal, headersTimeout: timeoutMs, bodyTimeout: timeoutMs };
          if (grpcService !== null) return grpcProbe(pools.get(origin, pool), request, grpcService);
          const res = await pools.get(origin, pool).request({ ...request, method });
          // Read to the end (bounded), so the connection goes back to the pool.
          await res.body.dump({ limit: 64 * 1024 });
          const good = healthy ? healthy.has(res.statusCode) : res.statusCode >= 200 && res.statusCode < 400;
          return good ? null : `status ${res.statusCode}`;
        },
      );
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    }
  };
}

/** gRPC's health protocol (grpc-health.ts): healthy when the call succeeds and names SERVING. */
async function grpcProbe(
  pool: Dispatcher,
  request: { path: string; headers: Record<string, string>; signal: AbortSignal; headersTimeout: number; bodyTimeout: number },
  service: string,
): Promise<string | null> {
  const res = await pool.request({
    ...request,
    method: 'POST',
    headers: { ...request.headers, 'content-type': 'application/grpc', 'grpc-timeout': `${request.headersTimeout}m` },
    body: healthCheckRequest(service),
  });
  if (res.statusCode !== 200) {
    await res.body.dump({ limit: 64 * 1024 });
    return `status ${res.statusCode}`;
  }
  // A HealthCheckResponse is a few bytes: a larger body is not one, and is not read on.
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    size += (chunk as Buffer).length;
    if (size > 1024) {
      res.body.destroy();
      return 'answer larger than a HealthCheckResponse';
    }
    chunks.push(chunk as Buffer);
  }
  const body = Buffer.concat(chunks);
  // The status of a Trailers-Only answer is in its head, else in the trailers (filled once the body is read).
  const grpcStatus = res.headers['grpc-status'] ?? res.trailers['grpc-status'];
  if (grpcStatus !== '0') return `grpc-status ${String(grpcStatus ?? 'missing')}`;
  const serving = servingStatus(body);
  return serving === 'SERVING' ? null : serving;
}

export function createHealthRegistry(deps: { probe: Probe; logger?: Logger; registry?: Registry }): HealthRegistry {
  const checks = new RouteStateRegistry<TargetHealth>({ added: (health) => health.start(), dropped: (health) => health.stop() });
  if (deps.registry) {
    new Gauge({
      name: 'gatehouse_upstream_target_healthy',
      help: 'Health of each health-checked upstream target by route: 1 healthy, 0 unhealthy (out of rotation).',
      labelNames: ['route', 'target'],
      registers: [deps.registry],
      collect() {
        this.reset();
        for (const [health, route, target] of checks.uses()) this.set({ route, target }, health.healthy ? 1 : 0);
      },
    });
  }
  return {
    begin() {
      const generation = checks.begin();
      return {
        get(routeId, target, check, pool) {
          // compile (proxy.upstreams.health_check) refuses a checked target whose authority is a placeholder.
          const { origin, host } = fixedAuthority(target.plan)!;
          const key = `${pool.insecureSkipVerify}\n${pool.dialTimeoutMs}\n${pool.http2 === true}\n${origin}\n${JSON.stringify(check)}`;
          return generation.get(key, routeId, target.template, () => new TargetHealth(origin, pool, settingsOf(check, host), deps.probe, deps.logger));
        },
        release: (routeId) => generation.release(routeId),
        releaseAll: () => generation.releaseAll(),
        commit: () => generation.commit(),
      };
    },
    stop: () => checks.clear(),
  };
}
