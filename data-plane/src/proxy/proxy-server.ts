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
import { createGatewayTlsListener, createListener, requiresClientCertificates, type ProxyHttpServer } from './listener.js';
import { createMirrorSender } from './mirror.js';
import { createPlanner } from './plan.js';
import type { ProxyMetrics } from './proxy-metrics.js';
import { propagationOnly, type RequestTracer } from './request-trace.js';
import { createUpgradeHandler } from './upgrade-request.js';
import type { UpstreamPools } from './upstream-pools.js';

export interface ProxyServer {
  readonly server: ProxyHttpServer;
  /** The Gateway API HTTPS listener (listener.ts createGatewayTlsListener); null without `gatewayTls`. */
  readonly gatewayServer: ProxyHttpServer | null;
  /** Resolves with the bound port (useful with port 0). */
  listen(port: number, host?: string): Promise<number>;
  /** Binds the Gateway API HTTPS listener (GATEWAY_HTTPS_PORT); resolves with the bound port. */
  listenGateway(port: number, host?: string): Promise<number>;
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
  /** GATEWAY_HTTPS_PORT is set: a second listener serves the snapshot's Gateway HTTPS listeners, the same requests; `http2`: h2 offered by ALPN. */
  gatewayTls?: { http2: boolean } | null;
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
  const gateway = deps.gatewayTls
    ? createGatewayTlsListener({ tables, http2: deps.gatewayTls.http2, tlsMinVersion: deps.tlsMinVersion }, handle, refuseHost)
    : null;
  for (const listening of gateway ? [server, gateway.server] : [server])
    listening.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => void upgrade(req, socket, head));
  const servers = gateway ? [{ server, connections }, gateway] : [{ server, connections }];

  return {
    server,
    gatewayServer: gateway?.server ?? null,
    listen(port, host) {
      return listen(server, port, host);
    },
    listenGateway(port, host) {
      if (!gateway) throw new Error('no Gateway HTTPS listener: created without gatewayTls');
      return listen(gateway.server, port, host);
    },
    async close(timeoutMs, delayMs = 0) {
      draining = true;
      if (delayMs > 0) {
        for (const s of servers) s.connections.goAway();
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
      // server.close() also closes the idle keep-alive connections (node >= 19); a server never bound closes at once.
      const closed = Promise.all(servers.map((s) => new Promise<void>((resolve) => s.server.close(() => resolve()))));
      for (const s of servers) s.connections.drain();
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
      });
      const drained = await Promise.race([closed.then(() => true as const), timedOut]);
      clearTimeout(timer);
      if (!drained) {
        for (const s of servers) s.connections.cut();
        for (const socket of upgraded) socket.destroy();
        await closed;
      }
      return drained;
    },
  };
}
