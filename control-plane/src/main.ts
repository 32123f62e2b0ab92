/**
 * Control plane entry: creates every instance and wires the pipeline
 *   admin REST (admin/) → store (store/: file or Kubernetes CRs) → snapshot builder (snapshot/) → gRPC stream (grpc/) → data planes
 * plus, with the Kubernetes store, the controller (controller/: leader election, CR status),
 * and shuts them down in reverse order on SIGTERM/SIGINT.
 */
// First: the young generation is held from the loading of every module below (young-generation.ts).
import { endStartUpHold } from './young-generation.js';
import { createServer, type RequestListener, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { logCertificateReload, watchListenerCertificates, type CertificateWatcher } from '#proto/certificate-files';
import { shortHmacKeysOf } from '#proto/compile/index';
import type { KeyAuthCredential, OAuthServerDefinition } from '#proto/definition/index';
import { GRPC_TLS_NAMES, isLoopbackHost, loadGatehouseProto, routeGrpcLogs, serverCredentials } from '#proto/grpc';
import { createLogger, type Logger } from '#proto/logger';
import { startTracing } from '#proto/tracing';
import { bindListener, exitIfShutdownHangs, exitOnInvalidConfiguration, listen, logStartFailure } from '#proto/listen';
import { generatesJoinToken, loadConfig, type ControlPlaneConfig } from './config.js';
import { openStore } from './store/open-store.js';
import { createMemoryHistory, openFileHistory } from './store/config-history.js';
import { startController, type Controller } from './controller/index.js';
import type { StreamCallbacks } from './grpc/snapshot-server.js';
import { createSnapshotBuilder } from './snapshot/snapshot-builder.js';
import { createSnapshotServer } from './grpc/snapshot-server.js';
import { createControlPlaneMetrics } from './metrics/control-plane-metrics.js';
import { readOrCreateSecret, resolveAdminSecrets, strongSecret } from './admin/admin-credentials.js';
import { createAdminAuth } from './admin/admin-auth.js';
import { createLoginThrottle } from './admin/login-throttle.js';
import { createStreamAuthenticator } from './grpc/stream-auth.js';
import { useKeyAuthHashKey } from './admin/credential-kinds.js';
import { isLegacyApiKeyHash } from '#proto/api-key';
import { createAdminApp } from './admin/app.js';
import { indexForWrites, requireResolvableServices } from './admin/definition-writes.js';
import { acceptShortHmacKeys } from './store/definition-kinds.js';
import { startServiceDiscovery } from './discovery/index.js';
import { startGatewayApi } from './gateway-api/index.js';

/** Slow or idle clients must not hold the admin port open forever. */
const ADMIN_REQUEST_TIMEOUT_MS = 30_000;
const ADMIN_HEADERS_TIMEOUT_MS = 10_000;

async function main(config: ControlPlaneConfig, logger: Logger): Promise<void> {
  // Until the listeners are up there is nothing to drain (e.g. SIGTERM during the Kubernetes store's first list).
  const stopEarly = (signal: string) => {
    logger.info({ signal }, 'stopped before start-up finished');
    process.exit(0);
  };
  process.once('SIGTERM', stopEarly);
  process.once('SIGINT', stopEarly);
  const grpcCertificates = config.grpcTls && watchListenerCertificates('grpc', config.grpcTls, GRPC_TLS_NAMES, config.tlsReloadIntervalMs, logger);
  const adminCertificates =
    config.adminTls &&
    watchListenerCertificates('admin', config.adminTls, { cert: 'ADMIN_TLS_CERT', key: 'ADMIN_TLS_KEY' }, config.tlsReloadIntervalMs, logger);
  const { opened, history } = await openConfiguration(config, logger);
  const store = opened.store;
  const secrets = await resolveAdminSecrets(config, logger);
  const joinTokens = await resolveJoinTokens(config, logger);
  const keyAuthHashKey = await resolveKeyAuthHashKey(config, logger);
  useKeyAuthHashKey(keyAuthHashKey);
  warnOfLegacyKeyHashes(store.current().defs.keyAuthCredentials ?? [], logger);
  routeGrpcLogs(logger);
  const proto = loadGatehouseProto();
  // Service discovery: k8s:// targets become their ready endpoints in what the data planes are served.
  const discovery = await startServiceDiscovery(
    store,
    opened.kind === 'kubernetes' && config.kubernetes
      ? { kubeConfig: opened.kubeConfig, namespaces: [...new Set([opened.store.namespace, ...config.kubernetes.discoveryNamespaces])] }
      : null,
    logger,
  );
  requireResolvableServices(discovery.check);
  const served = discovery.served;
  const snapshots = createSnapshotBuilder({ store: served, encodeSnapshot: proto.encodeSnapshot, encodeDelta: proto.encodeDelta, keyAuthHashKey, logger });
  endStartUpHold();

  // The gRPC server needs the metrics callbacks and the metrics read the server: late-bound getter.
  const metrics = createControlPlaneMetrics({
    snapshotVersion: () => snapshots.current().version,
    connectedDataPlanes: () => grpcServer.dataPlanes().length,
    defaultMetrics: true,
  });
  const grpcServer = createSnapshotServer({
    snapshots,
    service: proto.service,
    wrapPush: proto.wrapPush,
    credentials: serverCredentials(grpcCertificates, Boolean(config.grpcTls?.ca)),
    authenticate: createStreamAuthenticator({ joinTokens, clientCertificates: Boolean(config.grpcTls?.ca) }),
    logger,
    callbacks: withDataPlaneChanges(metrics.streamCallbacks, () => controller?.dataPlanesChanged()),
  });
  const storeVersion = <R extends { version: number } | null>(reply: R): R => (reply ? { ...reply, version: served.storeRevisionOf(reply.version) } : reply);
  const controller: Controller | null =
    opened.kind === 'kubernetes' && config.kubernetes
      ? startController({
          store: opened.store,
          kubeConfig: opened.kubeConfig,
          config: config.kubernetes,
          // The controller counts store revisions; a snapshot version also counts endpoint changes.
          dataPlanes: () => grpcServer.dataPlanes().map((dp) => ({ ...dp, last_ack: storeVersion(dp.last_ack), last_nack: storeVersion(dp.last_nack) })),
          logger,
        })
      : null;
  // Gateway API: HTTPRoutes become definitions served in memory (never stored); the leader writes their status.
  const gatewayApi =
    opened.kind === 'kubernetes' && config.kubernetes?.gatewayApi
      ? startGatewayApi({
          kubeConfig: opened.kubeConfig,
          namespace: opened.store.namespace,
          controllerName: config.kubernetes.gatewayApi.controllerName,
          addressService: config.kubernetes.gatewayApi.addressService,
          store,
          served,
          isLeader: () => controller?.isLeader() ?? false,
          rateLimit: config.kubernetes.apiRateLimit,
          logger,
        })
      : null;
  const grpcSetting = { listener: 'grpc', portVariable: 'GRPC_PORT', hostVariable: 'GRPC_HOST', port: config.grpcPort, host: config.grpcHost };
  const grpcPort = await bindListener(grpcSetting, () => grpcServer.listen(config.grpcHost, config.grpcPort));
  const dataPlaneAuth = config.grpcTls?.ca ? 'mtls' : joinTokens.length > 0 ? 'join-token' : 'none';
  // joinTokenFile: where `npm start` reads the generated token for its data plane.
  const joinTokenFile = generatesJoinToken(config) ? config.grpcJoinTokenFile : undefined;
  logger.info({ listener: 'grpc', port: grpcPort, host: config.grpcHost, tls: config.grpcTls !== null, dataPlaneAuth, joinTokenFile }, 'listening');
  warnOfOpenGrpc(config, dataPlaneAuth, logger);

  const auth = createAdminAuth({
    user: config.adminUser,
    password: secrets.password,
    viewer: config.adminViewer,
    jwtSecret: secrets.jwtSecret,
    tokenTtlSeconds: config.adminTokenTtlSeconds,
  });
  const loginThrottle = createLoginThrottle(config.loginThrottle);
  // Tracing off: not even the OpenTelemetry API is loaded.
  const tracing = await startTracing('control-plane', process.env, logger);
  const writeSpans = tracing ? (await import('./admin/admin-write-spans.js')).traceAdminWrites(tracing.tracer) : undefined;
  const app = createAdminApp({
    store,
    served,
    snapshots,
    dataPlanes: () => grpcServer.dataPlanes(),
    auth,
    loginThrottle,
    metrics,
    logger,
    history,
    writeSpans,
    allowShortHmacKeys: config.allowShortHmacKeys,
  });
  const http = adminServer(app, adminCertificates);
  const adminSetting = { listener: 'admin', portVariable: 'ADMIN_PORT', hostVariable: 'ADMIN_HOST', port: config.adminPort, host: config.adminHost };
  const adminPort = await bindListener(adminSetting, () => listen(http, config.adminPort, config.adminHost));
  logger.info({ listener: 'admin', port: adminPort, host: config.adminHost, tls: adminCertificates !== null }, 'listening');

  process.on('SIGHUP', () => {
    if (grpcCertificates) logCertificateReload(logger, 'grpc', grpcCertificates.reload());
    if (adminCertificates) logCertificateReload(logger, 'admin', adminCertificates.reload());
  });

  process.off('SIGTERM', stopEarly);
  process.off('SIGINT', stopEarly);
  // Reverse order of creation: admin HTTP (in-flight writes finish, stopOnSignals), gRPC streams, builder, store.
  stopOnSignals(config, logger, http, async (timeLeftMs) => {
    await controller?.close();
    await grpcServer.close(timeLeftMs());
    snapshots.close();
    gatewayApi?.close();
    discovery.close();
    grpcCertificates?.close();
    adminCertificates?.close();
    await store.close();
    await tracing?.shutdown(2_000); // the spans of the last writes
    await history.close();
  });
}

/** The store (file or Kubernetes CRs) and the configuration history, indexed for admin writes; what they hold checked at start. */
async function openConfiguration(config: ControlPlaneConfig, logger: Logger) {
  // Before the store opens: the Kubernetes store holds every OAuthServer it reads to it.
  acceptShortHmacKeys(config.allowShortHmacKeys);
  const opened = await openStore(config, logger);
  const store = opened.store;
  const historyOptions = { limit: config.configHistory, logger };
  const history = opened.kind === 'file' ? await openFileHistory({ ...historyOptions, dataDir: config.dataDir }) : createMemoryHistory(historyOptions);
  await history.seed(store.current());
  const indexing = performance.now();
  const { defs } = store.current();
  indexForWrites(defs);
  warnOfShortHmacKeys(config.allowShortHmacKeys, defs.oauthServers, logger);
  logger.info({ apis: defs.apis.length, ms: Math.round(performance.now() - indexing) }, 'indexed the configuration for admin writes');
  return { opened, history };
}

/** What a gRPC listener open to more than loopback, or to anyone, exposes: said at every start. */
function warnOfOpenGrpc(config: ControlPlaneConfig, dataPlaneAuth: string, logger: Logger): void {
  if (!config.grpcTls && !isLoopbackHost(config.grpcHost)) {
    logger.warn(
      { host: config.grpcHost },
      'GRPC_INSECURE=true: snapshots (upstreams, JWT secrets) are served in plaintext to any client that reaches this port',
    );
  }
  if (dataPlaneAuth === 'none') {
    logger.warn(
      { host: config.grpcHost },
      'GRPC_INSECURE=true without GRPC_JOIN_TOKEN: any process that reaches the gRPC port reads every snapshot (upstreams, secrets)',
    );
  }
}

/** The admin API's server: HTTPS with the watched ADMIN_TLS_* files (new ones for new connections), else HTTP. */
function adminServer(app: RequestListener, adminCertificates: CertificateWatcher | null): Server {
  const serverOptions = { requestTimeout: ADMIN_REQUEST_TIMEOUT_MS, headersTimeout: ADMIN_HEADERS_TIMEOUT_MS };
  if (adminCertificates) {
    const { cert, key } = adminCertificates.current();
    const https = createHttpsServer({ ...serverOptions, cert, key }, app);
    adminCertificates.subscribe((set) => https.setSecureContext({ cert: set.cert, key: set.key }));
    return https;
  }
  return createServer(serverOptions, app);
}

/**
 * On SIGTERM or SIGINT: the admin server closes (in-flight writes finish, keep-alive connections close once idle),
 * then `closeRest` closes the rest in the reverse order of creation, all within SHUTDOWN_TIMEOUT, and the process exits.
 */
function stopOnSignals(config: ControlPlaneConfig, logger: Logger, http: Server, closeRest: (timeLeftMs: () => number) => Promise<void>): void {
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal, timeoutMs: config.shutdownTimeoutMs }, 'shutting down');
    const deadlineAt = Date.now() + config.shutdownTimeoutMs;
    const deadline = setTimeout(() => {
      logger.warn('shutdown timed out; closing remaining connections');
      http.closeAllConnections();
    }, config.shutdownTimeoutMs);
    deadline.unref();
    exitIfShutdownHangs(logger, config.shutdownTimeoutMs); // e.g. an apiserver that answers nothing while the Lease is released
    const httpClosed = new Promise<void>((resolve) => http.close(() => resolve()));
    // Keep-alive connections become idle once their in-flight request is answered: close them then.
    const idleSweep = setInterval(() => http.closeIdleConnections(), 50);
    await httpClosed;
    clearInterval(idleSweep);
    await closeRest(() => Math.max(0, deadlineAt - Date.now()));
    clearTimeout(deadline);
    logger.info('stopped');
    process.exit(0);
  };
  const onSignal = (signal: string) =>
    shutdown(signal).catch((err: unknown) => {
      logger.error({ err }, 'shutdown failed');
      process.exit(1);
    });
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
}

/**
 * Every start says whether short HS keys are allowed and which stored ones are short (RFC 7518 §3.2):
 * with ALLOW_SHORT_HMAC_KEYS a warning, without it an error (they are served, but a write of them is refused).
 */
function warnOfShortHmacKeys(allowed: boolean, servers: readonly OAuthServerDefinition[], logger: Logger): void {
  const shortKeys = servers.flatMap((server) => shortHmacKeysOf(server).map((field) => `oauth server ${server.name}: ${field}`));
  if (allowed) {
    logger.warn(
      { shortKeys },
      'ALLOW_SHORT_HMAC_KEYS=true: HS keys shorter than 32 bytes are accepted (RFC 7518 §3.2 asks for 32); rotate them, then unset it',
    );
  } else if (shortKeys.length > 0) {
    logger.error(
      { shortKeys },
      'stored HS keys are shorter than 32 bytes: they are served, but a write of them is refused until rotated (or ALLOW_SHORT_HMAC_KEYS=true)',
    );
  }
}

/**
 * GRPC_JOIN_TOKEN when set; with no data-plane credential configured, one generated once into
 * DATA_DIR (mode 0600) and reused on every restart. Only the file's path is logged.
 */
async function resolveJoinTokens(config: ControlPlaneConfig, logger: Logger): Promise<string[]> {
  if (!generatesJoinToken(config)) return config.grpcJoinTokens;
  const { value, created } = await readOrCreateSecret(config.grpcJoinTokenFile, strongSecret);
  const path = config.grpcJoinTokenFile;
  if (created) logger.warn({ path }, 'generated gRPC join token written to file: data planes present it as GRPC_JOIN_TOKEN');
  else logger.info({ path }, 'gRPC join token read from file: data planes present it as GRPC_JOIN_TOKEN');
  return [value];
}

/**
 * KEY_AUTH_HASH_KEY when set; otherwise one generated once into DATA_DIR (mode 0600) and reused on every
 * restart: losing it makes every key stored in the keyed form fail to authenticate. Only the file's path is logged.
 */
async function resolveKeyAuthHashKey(config: ControlPlaneConfig, logger: Logger): Promise<string> {
  if (config.keyAuthHashKey !== undefined) return config.keyAuthHashKey;
  const path = config.keyAuthHashKeyFile;
  const { value, created } = await readOrCreateSecret(path, strongSecret);
  if (config.store === 'kubernetes') {
    logger.warn({ path }, 'STORE=kubernetes without KEY_AUTH_HASH_KEY: every control-plane replica must hash API keys with the same key; set it from a Secret');
  }
  logger.info({ path }, created ? 'generated key_auth hash key written to file' : 'key_auth hash key read from file');
  return value;
}

/**
 * key_auth hashes still in the unkeyed `sha256$` form are verified, but a leaked store lets anyone test
 * guesses of them: every start names them, so they can be rotated (a write of a key stores the keyed form).
 */
function warnOfLegacyKeyHashes(credentials: readonly KeyAuthCredential[], logger: Logger): void {
  const legacy = credentials.filter((c) => isLegacyApiKeyHash(c.key_hash)).map((c) => c.username);
  if (legacy.length === 0) return;
  logger.warn(
    { count: legacy.length, usernames: legacy.slice(0, 100) },
    'key_auth credentials hashed with unkeyed SHA-256 ("sha256$"): they still authenticate; rotate their keys (PUT /credentials/key_auth/{username} with a key) to store them keyed',
  );
}

/** Every data-plane event also tells the controller (Programmed counts ACKs and NACKs). */
function withDataPlaneChanges(callbacks: StreamCallbacks, changed: () => void): StreamCallbacks {
  const also =
    <A extends unknown[]>(fn?: (...args: A) => void) =>
    (...args: A) => {
      fn?.(...args);
      changed();
    };
  return {
    ...callbacks,
    onConnect: also(callbacks.onConnect),
    onDisconnect: also(callbacks.onDisconnect),
    onAck: also(callbacks.onAck),
    onNack: also(callbacks.onNack),
  };
}

/** One line that says why (e.g. which store file cannot be loaded), the stack in `err`. */
function fail(logger: Logger, err: unknown): never {
  logStartFailure(logger, err, `control plane failed to start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
}

let config: ControlPlaneConfig;
try {
  config = loadConfig(process.env);
} catch (err) {
  exitOnInvalidConfiguration('control-plane', err);
}
const logger = createLogger('control-plane', config.logLevel);
main(config, logger).catch((err: unknown) => fail(logger, err));
