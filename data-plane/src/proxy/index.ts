/** Forward stage of the pipeline: the proxy listener and its upstream connections. */
export { clientResponseHeaders, requestIdOf, upstreamRequestHeaders } from './headers.js';
export { createProxyMetrics, type ProxyMetrics } from './proxy-metrics.js';
export { createProxyServer, type ProxyServer } from './proxy-server.js';
export { upstreamError } from './upstream-error.js';
export { createUpstreamPools, type UpstreamPools } from './upstream-pools.js';
