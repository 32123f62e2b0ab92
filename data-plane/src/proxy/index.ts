/** Forward stage of the pipeline: the proxy listener and its upstream connections. */
export { clientResponseHeaders, requestIdOf, upstreamRequestHeaders } from './headers.js';
export { createAccessLog, type AccessLog, type AccessLogConfig } from './access-log.js';
export { createProxyMetrics, UNMATCHED_ROUTE, type ProxyMetrics } from './proxy-metrics.js';
export { createProxyServer, type ProxyServer } from './proxy-server.js';
export { upstreamError } from './upstream-error.js';
export { createUpstreamPools, type UpstreamPools } from './upstream-pools.js';
