/**
 * The proxy listener (docs/proxy.md "Proxy behaviour"): the server (listener.ts) with its request handler
 * (dispatch.ts: routing, plugins, forwarding) and its upgrade handler (upgrade-request.ts: WebSocket handshakes),
 * and the drain that closes it.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { GatehouseError } from '#proto/errors';
import type { Logger } from '#proto/logger';
import { listen } from '#proto/listen';
import type { CertificateWatcher } from '#proto/certificate-files';
import { NO_TRUSTED_PROXIES, type TrustedProxies } from '../plugins/client-ip.js';
import type { TableSource } from '../table/index.js';
import type { AccessLog } from './access-log.js';
import { createDispatch } from './dispatch.js';
import type { ForwardDeps } from './forward.js';
import { createGatewayAnswers } from './gateway-answers.js';
import { requestIdOf } from './headers.js';
import { createListener, requiresClientCertificates, type ProxyHttpServer } from './listener.js';
import { createMirrorSender } from './mirror.js';
import { createPlanner } from './plan.js';
import type { ProxyMetrics } from './proxy-metrics.js';
import { propagationOnly, type RequestTracer } from './request-trace.js';
import { createUpgradeHandler } from './upgrade-request.js';
import type { UpstreamPools } from './upstream-pools.js';

export interface ProxyServer {
  readonly server: ProxyHttpServer;
  /** Resolves with the bound port (useful with port 0). */
  listen(port: number, host?: string): Promise<number>;
  /**
   * Drains: for `delayMs` it still accepts and serves, every answer closing its connection (`Connection: close`,
   * h2 GOAWAY) so keep-alive clients move on between requests rather than have an idle connection cut under a
   * request already sent; then stops accepting, closes idle connections, lets in-flight requests finish for up
   * to `timeoutMs`, and cuts what is left. Resolves true when everything finished in time.
   */
  close(timeoutMs: number, delayMs?: number): Promise<boolean>;
}

export function createProxyServer(deps: {
  holder: TableSource;
  pools: UpstreamPools;
  logger: Logger;
  metrics?: ProxyMetrics;
  /** null or absent: no access log (ACCESS_LOG=off). */
  accessLog?: AccessLog | null;
  /** Spans per request when tracing is on; absent: W3C traceparent propagation only. */
  tracer?: RequestTracer;
  /** PROXY_TLS_CERT / PROXY_TLS_KEY: the listener serves HTTPS with the watched files (new ones for new connections). */
  tls?: CertificateWatcher | null;
  /** PROXY_HTTP2: with `tls`, h2 is offered by ALPN beside HTTP/1.1 (http2.ts). */
  http2?: boolean;
  /** PROXY_H2C: without `tls`, a connection that opens with the HTTP/2 preface is served h2 (http2.ts acceptH2c). */
  h2c?: boolean;
  /** PROXY_TLS_MIN_VERSION (default TLSv1.2). */
  tlsMinVersion?: 'TLSv1.2' | 'TLSv1.3';
  /** TRUSTED_PROXIES (plugins/client-ip.ts); none when absent. */
  trustedProxies?: TrustedProxies;
}): ProxyServer {
  const { holder: tables, pools, logger, metrics } = deps;
  const trusted = deps.trustedProxies ?? NO_TRUSTED_PROXIES;
  const accessLog = deps.accessLog ?? null;
  const tracer = deps.tracer ?? propagationOnly;
  let draining = false;
  const forwardDeps: ForwardDeps = { logger, metrics, draining: () => draining };
  const answers = createGatewayAnswers(forwardDeps);
  const planFor = createPlanner({ pools, trusted, clientCertificates: requiresClientCertificates(deps.tls) });
  const mirrors = createMirrorSender({ pools, logger, metrics });
  const handle = createDispatch({ tables, metrics, accessLog, tracer, trusted, forwardDeps, mirrors, answers, planFor });
  const { upgrade, upgraded } = createUpgradeHandler({ tables, metrics, accessLog, tracer, trusted, answers, planFor, handle });

  /** An h2 request whose Host contradicts its `:authority`, or that has neither (http2.ts). */
  const refuseHost = (req: IncomingMessage, res: ServerResponse): void =>
    answers.failed(
      res,
      requestIdOf(req.headers['x-request-id']),
      new GatehouseError('BAD_REQUEST_HOST', 'Host differs from :authority, or neither is given'),
      '',
      null,
    );

  const { server, connections } = createListener(deps, handle, refuseHost);
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => void upgrade(req, socket, head));

  return {
    server,
    listen(port, host) {
      return listen(server, port, host);
    },
    async close(timeoutMs, delayMs = 0) {
      draining = true;
      if (delayMs > 0) {
        connections.goAway();
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
      // server.close() also closes the idle keep-alive connections (node >= 19).
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      connections.drain();
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
      });
      const drained = await Promise.race([closed.then(() => true as const), timedOut]);
      clearTimeout(timer);
      if (!drained) {
        connections.cut();
        for (const socket of upgraded) socket.destroy();
        await closed;
      }
      return drained;
    },
  };
}
