/**
 * Data-plane process: wires the instances together (the only place that holds them), binds the
 * proxy and status listeners, connects to the control plane, and shuts down gracefully.
 * WORKERS > 1: this file runs as the primary (workers/primary.ts) and as each worker, which is
 * the single process minus the status listener (the primary answers for all).
 */
// First: its hold covers the loading of every module below (start-up-hold.ts).
import { endStartUpHold, holdYoungGeneration, youngGenerationAtHold } from './memory/start-up-hold.js';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { collectDefaultMetrics, Counter, Registry } from 'prom-client';
import { clientCredentials, loadGatehouseProto, tlsServerNameOptions } from '#proto/grpc';
import { createLogger, type Logger } from '#proto/logger';
import { keepDefinitionHashes } from '#proto/snapshot/codec';
import { startTracing } from '#proto/tracing';
import { bindListener, exitIfShutdownHangs, exitOnInvalidConfiguration, listen, logStartFailure } from '#proto/listen';
import { logCertificateReload, watchListenerCertificates } from '#proto/certificate-files';
import { createIntrospector, createJwksCache, createTokenStore } from './auth/index.js';
import { createOidcProviders } from './auth/oidc-provider.js';
import { createFetchMetrics } from './auth/fetch-metrics.js';
import { loadConfig, PROXY_TLS_NAMES, type DataPlaneConfig } from './config.js';
import { createAccessLog, createProxyMetrics, createProxyServer, createUpstreamPools } from './proxy/index.js';
import { watchUpstreamTls } from './proxy/upstream-tls.js';
import { createHttpsRedirectServer } from './proxy/https-redirect.js';
import { createRateLimiter } from './plugins/rate-limit/index.js';
import { createResponseCache } from './plugins/index.js';
import { createHealthRegistry, poolProbe } from './health/index.js';
import { createStatusServer } from './status/index.js';
import { startIdleTrim } from './memory/index.js';
import { createTableBuilder } from './table/index.js';
import { createSnapshotCache, createSnapshotClient, createSnapshotHolder, type SnapshotCache, type SnapshotHolder } from './sync/index.js';
import { answerStateRequests, exposeWorkerMetrics, replacementProxyPort, runPrimary, until, workerNumber } from './workers/index.js';

function softwareVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: string };
    return pkg.version ?? '0.0.0';
  } catch {
    return '0.0.0';
  }
}

/** How long a cold start waits for the CP's first push before serving SNAPSHOT_CACHE, when no attempt has failed yet. */
const CACHE_FALLBACK_WAIT_MS = 3000;

/** SNAPSHOT_CACHE at cold start: serve the last configuration while no control plane answers. */
function applyCachedSnapshot(cache: SnapshotCache, holder: SnapshotHolder, logger: Logger): void {
  try {
    const message = cache.load();
    if (!message) return;
    const result = holder.apply(message);
    if (result.ok) logger.info({ path: cache.path, version: result.version, hash: result.hash }, 'serving cached snapshot');
    else logger.warn({ path: cache.path, err: result.error }, 'cached snapshot rejected');
  } catch (err) {
    logger.warn({ path: cache.path, err }, 'could not read the snapshot cache');
  }
}

/** `worker`: this process's number under a WORKERS primary; undefined = the whole data plane. */
async function run(config: DataPlaneConfig, logger: Logger, worker: number | undefined): Promise<void> {
  // Read now, so unreadable files fail the start; then re-read at every reconnect (renewed certificates).
  clientCredentials(config.grpcTls);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  if (worker) exposeWorkerMetrics(registry, worker);

  const tokenStore = createTokenStore({ redisUrl: config.redisUrl, logger });
  const rateLimiter = createRateLimiter({ redisUrl: config.redisUrl, redisTimeoutMs: config.rateLimitRedisTimeoutMs, logger, registry });
  // Created before the holder: the introspection strategy and JWKS fetches call their endpoints through the proxy's pools.
  const upstreamTls =
    config.upstreamTls && watchUpstreamTls(config.upstreamTls, config.tlsReloadIntervalMs, (result) => logCertificateReload(logger, 'upstream', result));
  const pools = createUpstreamPools({ tls: upstreamTls });
  const introspector = createIntrospector({ pools, logger });
  const fetchMetrics = createFetchMetrics(registry);
  const jwks = createJwksCache({ pools, logger, metrics: fetchMetrics });
  fetchMetrics.reportKeysOf(jwks);
  // Its own JWKS cache: the holder's `retain` keeps only the OAuth servers' sets.
  const oidc = createOidcProviders({ pools, jwks: createJwksCache({ pools, logger, metrics: fetchMetrics }), logger, metrics: fetchMetrics });
  const health = createHealthRegistry({ probe: poolProbe(pools), logger, registry });
  const responseCache = createResponseCache({ maxBytes: config.proxyCacheBytes, registry });
  // Each definition is hashed when it arrives and once more when an edit replaces it: keeping the hashes cost more.
  keepDefinitionHashes(false);
  const tables = createTableBuilder({
    tokenStore,
    introspector,
    jwks,
    oidc,
    logger,
    registry,
    rateLimiter,
    health,
    responseCache,
    trustedProxies: config.trustedProxies,
  });
  const holder = createSnapshotHolder({ tables, registry, holdYoungGeneration, endStartUpHold });
  const cache = config.snapshotCache ? createSnapshotCache(config.snapshotCache) : undefined;

  const accessLog = createAccessLog(config.accessLog, logger, config.trustedProxies);
  // Tracing off: not even the OpenTelemetry API is loaded; the proxy then only propagates traceparent.
  const spansDropped = new Counter({
    name: 'gatehouse_trace_spans_dropped_total',
    help: 'Spans not exported, by reason: queue_full (the exporter was behind; the proxy never waits for it) or export_failed (a batch the collector did not take).',
    labelNames: ['reason'],
    registers: [registry],
  });
  for (const reason of ['queue_full', 'export_failed']) spansDropped.inc({ reason }, 0);
  const tracing = await startTracing('data-plane', process.env, logger, { dropped: (reason, spans) => spansDropped.inc({ reason }, spans) });
  const tracer = tracing ? (await import('./proxy/otel-request-tracer.js')).createOtelRequestTracer(tracing) : undefined;
  const certificates = config.proxyTls && watchListenerCertificates('proxy', config.proxyTls, PROXY_TLS_NAMES, config.tlsReloadIntervalMs, logger);
  const metrics = createProxyMetrics(registry);
  const idleTrim =
    config.idleTrimMs > 0
      ? startIdleTrim({
          idleMs: config.idleTrimMs,
          requests: metrics.arrived,
          trimmed: (pauseMs, youngGenerationBytes, fullGc) =>
            logger.debug({ pauseMs: Math.round(pauseMs), youngGenerationBytes, fullGc }, 'heap trimmed after idle'),
        })
      : null;
  const proxy = createProxyServer({
    holder,
    pools,
    logger,
    metrics,
    accessLog,
    tracer,
    tls: certificates,
    http2: config.proxyHttp2,
    h2c: config.proxyH2c,
    tlsMinVersion: config.proxyTlsMinVersion,
    trustedProxies: config.trustedProxies,
    gatewayTls: config.gatewayHttpsPort === null ? null : { http2: config.gatewayHttp2 },
  });
  // Until the snapshot client exists (below) a /readyz says only that no snapshot is there yet.
  let waiting = (): string => `waiting for the first snapshot from control plane ${config.controlPlaneAddr}`;
  const status = worker ? undefined : createStatusServer({ holder, registry, logger, waiting: () => waiting() });
  const { proxyPort: port, proxyHost: host } = config;
  const bindProxy = async (): Promise<number> => {
    const bound = await bindListener({ listener: 'proxy', portVariable: 'PROXY_PORT', hostVariable: 'PROXY_HOST', port, host }, () => proxy.listen(port, host));
    logger.info(
      {
        listener: 'proxy',
        port: bound,
        tls: certificates !== null,
        http2: config.proxyHttp2,
        h2c: config.proxyH2c,
        clientCertificates: config.proxyTls?.ca !== undefined,
      },
      'listening',
    );
    const { gatewayHttpsPort: gatewayPort } = config;
    if (gatewayPort !== null) {
      const setting = { listener: 'gateway-https', portVariable: 'GATEWAY_HTTPS_PORT', hostVariable: 'PROXY_HOST', port: gatewayPort, host };
      const gatewayBound = await bindListener(setting, () => proxy.listenGateway(gatewayPort, host));
      logger.info({ listener: 'gateway-https', port: gatewayBound, http2: config.gatewayHttp2 }, 'listening');
    }
    return bound;
  };
  // The primary hands a worker connections as soon as it listens: a replacement listens only once it
  // serves a snapshot, or its first requests would be 503 while its siblings serve (the port is known).
  const replacementPort = worker ? replacementProxyPort() : undefined;
  const proxyPort = replacementPort ?? (await bindProxy());
  const redirect = config.proxyHttpRedirectPort === null ? null : createHttpsRedirectServer();
  if (redirect) {
    const { proxyHttpRedirectPort: redirectPort } = config;
    const setting = { listener: 'redirect', portVariable: 'PROXY_HTTP_REDIRECT_PORT', hostVariable: 'PROXY_HOST', port: redirectPort!, host };
    const bound = await bindListener(setting, () => listen(redirect, redirectPort!, host));
    logger.info({ listener: 'redirect', port: bound }, 'listening');
  }
  if (status) {
    const statusSetting = { listener: 'status', portVariable: 'STATUS_PORT', hostVariable: 'STATUS_HOST', port: config.statusPort, host: config.statusHost };
    const statusPort = await bindListener(statusSetting, () => status.listen(config.statusPort, config.statusHost));
    logger.info({ listener: 'status', port: statusPort }, 'listening');
  }

  const anyInterface = !config.proxyHost || config.proxyHost === '0.0.0.0' || config.proxyHost === '::';
  const client = createSnapshotClient({
    proto: loadGatehouseProto({ clientChannelOptions: tlsServerNameOptions(config.grpcTlsServerName), lazyDefinitions: true }),
    address: config.controlPlaneAddr,
    credentials: () => clientCredentials(config.grpcTls),
    joinToken: config.grpcJoinToken,
    holder,
    identity: {
      // Each worker holds its own stream, so GET /dataplanes lists every worker with its version.
      id: worker ? `${config.dataplaneId}/w${worker}` : config.dataplaneId,
      hostname: hostname(),
      proxyAddress: `${anyInterface ? hostname() : config.proxyHost}:${proxyPort}`,
      softwareVersion: softwareVersion(),
    },
    backoff: { baseMs: config.reconnectBackoffBaseMs, maxMs: config.reconnectBackoffMaxMs },
    logger,
    // Every worker reads the cache at cold start; one writes it, so no older version can land last.
    cache: worker && worker > 1 ? undefined : cache,
    coldStart: cache && { waitMs: CACHE_FALLBACK_WAIT_MS, fallback: () => applyCachedSnapshot(cache, holder, logger) },
  });
  waiting = () => client.waiting();
  client.start();
  logger.debug({ youngGenerationBytes: youngGenerationAtHold }, 'young generation held until the first snapshot is applied');
  logger.info(
    { controlPlane: config.controlPlaneAddr, id: config.dataplaneId, ...(config.grpcTlsServerName ? { tlsServerName: config.grpcTlsServerName } : {}) },
    'connecting to control plane',
  );

  let stopping = false;
  if (worker) answerStateRequests(() => (stopping ? null : holder.current()));
  const shutdown = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal, delayMs: config.shutdownDelayMs, timeoutMs: config.shutdownTimeoutMs }, 'shutting down');
    exitIfShutdownHangs(logger, config.shutdownDelayMs + config.shutdownTimeoutMs);
    status?.markDraining();
    await client.close();
    await cache?.flush(); // a snapshot applied just before the signal is on disk for the next cold start
    health.stop();
    idleTrim?.stop();
    if (redirect) {
      redirect.close();
      redirect.closeIdleConnections();
    }
    const drained = await proxy.close(config.shutdownTimeoutMs, config.shutdownDelayMs);
    await status?.close();
    await pools.close();
    await tracing?.shutdown(2_000); // the spans of the last requests
    await tokenStore.close();
    await rateLimiter.close();
    logger.info({ drained }, 'stopped');
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));
  // Re-reads the proxy's certificate and the upstream TLS files now; without either it is ignored rather than ending the process (node's default).
  process.on('SIGHUP', () => {
    if (certificates) logCertificateReload(logger, 'proxy', certificates.reload());
    if (upstreamTls) logCertificateReload(logger, 'upstream', upstreamTls.reload());
  });
  if (replacementPort !== undefined) {
    await until(() => holder.current() !== null || stopping);
    if (!stopping) await bindProxy();
  }
}

const worker = workerNumber();
let config: DataPlaneConfig;
try {
  config = loadConfig(process.env);
} catch (err) {
  exitOnInvalidConfiguration('data-plane', err);
}
// Every line of a worker names it (the access log too): which worker served a request is in the logs.
const serviceLogger = createLogger('data-plane', config.logLevel);
const logger = worker ? serviceLogger.child({ worker }) : serviceLogger;
(config.workers > 1 && !worker ? runPrimary(config, logger) : run(config, logger, worker)).catch((err: unknown) => {
  logStartFailure(logger, err, 'data plane failed to start');
  process.exit(1);
});
