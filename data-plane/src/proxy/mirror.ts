/**
 * request_mirror's sending side (the copy is made by plugins/request-mirror.ts): fire and forget. The copy goes
 * out once the primary's request is planned and the copied body is whole, to the mirror's origin with what the
 * primary gets (method, rewritten path and query, headers after the gateway's rules) and a Host suffixed
 * `-shadow` before its port (Envoy's shadow host, so the mirror and its logs can tell a copy from live traffic).
 * Its answer is read (up to undici's dump limit) and dropped; nothing of it reaches the client, and its failures
 * are counted (gatehouse_mirror_requests_total) and logged at debug only. Bounded per process: MAX_IN_FLIGHT
 * copies from admission to the mirror's answer and MAX_BUFFERED_BYTES of copied bodies; past either a copy is
 * dropped (`overloaded`). Each mirror request has the route's response_header_timeout for its whole exchange.
 */
import type { ServerResponse } from 'node:http';
import type { Logger } from '#proto/logger';
import type { MirrorCopy } from '../plugins/index.js';
import type { RouteUpstream } from '../table/index.js';
import type { ForwardPlan } from './forward.js';
import type { MirrorOutcome, ProxyMetrics } from './proxy-metrics.js';
import { upstreamError } from './upstream-error.js';
import type { UpstreamPools } from './upstream-pools.js';

const MAX_IN_FLIGHT = 1000;
const MAX_BUFFERED_BYTES = 64 * 1024 ** 2;

export interface MirrorSender {
  /** Sends `copy` of the request planned as `plan`, when its body is whole; `res` is the client's response. */
  start(copy: MirrorCopy, method: string, plan: ForwardPlan, upstream: RouteUpstream, res: ServerResponse): void;
}

/** `host[:port]` → `host-shadow[:port]`; an IPv6 literal is kept (`[::1]-shadow` is no host at all). */
export function shadowHost(host: string): string {
  if (host.startsWith('[')) return host;
  const port = /:\d+$/.exec(host);
  return port ? `${host.slice(0, port.index)}-shadow${port[0]}` : `${host}-shadow`;
}

/** The primary's upstream headers with the shadow Host (upstreamRequestHeaders writes `host` lower-case, once). */
function shadowHeaders(headers: readonly string[]): string[] {
  const out = headers.slice();
  for (let i = 0; i < out.length; i += 2) if (out[i] === 'host') out[i + 1] = shadowHost(out[i + 1]!);
  return out;
}

export function createMirrorSender(deps: { pools: UpstreamPools; logger: Logger; metrics?: ProxyMetrics }): MirrorSender {
  const { pools, logger, metrics } = deps;
  let inFlight = 0;
  let buffered = 0;
  const take = (n: number): boolean => {
    if (buffered + n > MAX_BUFFERED_BYTES) return false;
    buffered += n;
    return true;
  };

  async function send(copy: MirrorCopy, method: string, plan: ForwardPlan, upstream: RouteUpstream): Promise<MirrorOutcome> {
    try {
      const pool = pools.get(copy.origin, upstream);
      const body = copy.chunks.length === 0 ? null : copy.chunks.length === 1 ? copy.chunks[0]! : Buffer.concat(copy.chunks);
      copy.chunks = [];
      const answer = await pool.request({
        method,
        path: plan.path,
        headers: shadowHeaders(plan.headers),
        body,
        signal: AbortSignal.timeout(upstream.headersTimeoutMs),
      });
      await answer.body.dump();
      return answer.statusCode >= 500 ? 'server_error' : 'responded';
    } catch (err) {
      const outcome = (err as Error).name === 'TimeoutError' || upstreamError(err).code === 'UPSTREAM_TIMEOUT' ? 'timeout' : 'error';
      logger.debug({ requestId: plan.requestId, route: plan.routeId, mirror: copy.origin, err }, 'mirror request failed');
      return outcome;
    }
  }

  return {
    start(copy, method, plan, upstream, res) {
      const count = (outcome: MirrorOutcome) => metrics?.mirror(plan.routeId, outcome);
      if (inFlight >= MAX_IN_FLIGHT) {
        copy.abandon();
        count('overloaded');
        return;
      }
      inFlight++;
      copy.take = take;
      // A body the primary never finished reading (it answered early) is given up with the exchange.
      if (!res.writableFinished) res.once('close', () => copy.abandon());
      copy.whenReady((failure) => {
        const done = (outcome: MirrorOutcome): void => {
          inFlight--;
          buffered -= copy.bytes;
          count(outcome);
        };
        if (failure) done(failure);
        else void send(copy, method, plan, upstream).then(done);
      });
    },
  };
}
