/**
 * rate_limit (config: proto/src/plugins/rate-limit.ts). Runs before authentication: each request
 * is counted against its client's key (client-key.ts) under this API and rate, in-process or in
 * Redis (rate-limiter.ts). Every response of the route, gateway errors included, carries
 * X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset (Unix seconds when the full limit
 * is available again, as Janus sends it); over the limit the answer is 429 RATE_LIMITED with
 * Retry-After (seconds) and the upstream sees nothing.
 */
import { GatehouseError } from '#proto/errors';
import type { CompiledRateLimit } from '#proto/plugins/index';
import type { PluginExchange } from '../pipeline.js';
import type { PluginRuntime } from '../runtime.js';
import { clientKey } from './client-key.js';
import type { RateDecision } from './gcra.js';

function answer(ex: PluginExchange, limit: CompiledRateLimit, decision: RateDecision): void {
  ex.addClientHeader('x-ratelimit-limit', limit.limitHeader);
  ex.addClientHeader('x-ratelimit-remaining', String(decision.remaining));
  ex.addClientHeader('x-ratelimit-reset', String(Math.ceil((Date.now() * 1000 + decision.resetInUs) / 1e6)));
  if (decision.allowed) return;
  ex.addClientHeader('retry-after', String(Math.max(1, Math.ceil(decision.retryAfterUs / 1e6))));
  throw new GatehouseError('RATE_LIMITED', `rate limit ${limit.rate} exceeded`);
}

export const rateLimitRuntime: PluginRuntime<CompiledRateLimit> = {
  stage(limit, { route, rateLimiter, trustedProxies }) {
    const decide = rateLimiter.decider(limit, route.id);
    const prefix = `${route.id}:${limit.rate}:`;
    return {
      request(ex) {
        const decision = decide(prefix + clientKey(ex.req, limit.key, trustedProxies));
        if (decision instanceof Promise) return decision.then((d) => answer(ex, limit, d));
        answer(ex, limit, decision);
        return;
      },
    };
  },
};

export { createRateLimiter, type RateLimiter } from './rate-limiter.js';
