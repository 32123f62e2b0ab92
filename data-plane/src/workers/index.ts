/** WORKERS > 1: a primary forking proxy workers that share PROXY_PORT (docs/operations.md "Workers"). */
export { runPrimary } from './primary.js';
export { answerStateRequests, exposeWorkerMetrics, replacementProxyPort, until, workerNumber } from './worker.js';
