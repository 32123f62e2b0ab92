/**
 * The data plane's routing: match and rewrite are the pure, shared code of proto/src/routing (the
 * control plane's POST /explain runs the same); the balancer (per-route rotation state, per data
 * plane) is the data plane's own.
 */
export * from '#proto/routing/index';
export { createBalancer, TargetLoad, type Balancer } from './balancer.js';
