/**
 * introspection token strategy (RFC 7662): the DP POSTs the bearer token to the OAuth server's
 * introspect endpoint and lets the request pass when the answer says `"active": true`.
 *
 * - One instance per process (main.ts), so its cache outlives snapshots; a cached verdict is keyed
 *   by the server's compiled settings (CompiledIntrospection.cacheKey) and a SHA-256 of the token, so
 *   a changed configuration never reuses one, and no raw token is kept.
 * - Active results are cached until the response's `exp`, at most `cache_ttl` seconds, in an LRU
 *   bounded to `cacheSize` tokens. Inactive ones are not cached (a token may become active later).
 * - Concurrent requests bearing one uncached token share a single call.
 * - An active answer whose `exp` is already past (beyond the leeway) counts as inactive.
 * - The endpoint unreachable, too slow (`timeout` bounds the whole call), answering other than 200,
 *   or not with a JSON object → TOKEN_INTROSPECTION_UNAVAILABLE (503): the token's validity is
 *   unknown, which is not the client's fault (no 401) and never a pass.
 */
import { hash as digest } from 'node:crypto';
import { GatehouseError } from '#proto/errors';
import type { CompiledIntrospection } from '#proto/compile/index';
import type { Logger } from '#proto/logger';
import { DeadlineCache } from './deadline-cache.js';
import { callJson, type CallPools } from './json-call.js';

export interface Introspector {
  /** Resolves when the token is active; rejects with TOKEN_REJECTED or TOKEN_INTROSPECTION_UNAVAILABLE. */
  check(config: CompiledIntrospection, token: string): Promise<void>;
  /** Active results currently remembered (tests, metrics). */
  cachedCount(): number;
}

export interface IntrospectorOptions {
  pools: CallPools;
  /** Seconds since epoch; injectable so tests move time instead of sleeping. */
  now?: () => number;
  cacheSize?: number;
  logger?: Pick<Logger, 'warn'>;
}

export const DEFAULT_INTROSPECTION_CACHE_SIZE = 10_000;
/** An introspection response is a small JSON object; more than this is not one. */
const MAX_RESPONSE_BYTES = 64 * 1024;
/** Longer headers are not tokens anyone issued (as for jwt). */
const MAX_TOKEN_LENGTH = 8192;

type Verdict = { active: true; exp: number | undefined } | { active: false };

function unavailable(config: CompiledIntrospection, reason: string, cause?: unknown): GatehouseError {
  return new GatehouseError('TOKEN_INTROSPECTION_UNAVAILABLE', `token introspection for oauth server ${config.serverName} failed: ${reason}`, {
    cause,
  });
}

export function createIntrospector(options: IntrospectorOptions): Introspector {
  const now = options.now ?? (() => Date.now() / 1000);
  /** key → the token counts as active until the deadline (seconds since epoch). */
  const cache = new DeadlineCache<true>(options.cacheSize ?? DEFAULT_INTROSPECTION_CACHE_SIZE);
  const inflight = new Map<string, Promise<Verdict>>();
  let rotation = 0;

  async function introspect(config: CompiledIntrospection, token: string): Promise<Verdict> {
    const target = config.targets[rotation++ % config.targets.length]!;
    const form = config.authScheme === null ? `token=${encodeURIComponent(token)}${config.formTail}` : config.formTail.slice(1);
    const headers = config.authScheme === null ? config.headers : { ...config.headers, authorization: `${config.authScheme} ${token}` };
    const json = await callJson(
      options.pools,
      {
        origin: target.origin,
        path: target.path,
        method: 'POST',
        headers,
        body: form,
        timeoutMs: config.timeoutMs,
        dialTimeoutMs: config.dialTimeoutMs,
        insecureSkipVerify: config.insecureSkipVerify,
        maxBytes: MAX_RESPONSE_BYTES,
        label: 'introspection endpoint',
      },
      (reason, cause) => unavailable(config, reason, cause),
    );
    const { active, exp } = json as { active?: unknown; exp?: unknown };
    if (active !== true) return { active: false };
    return { active: true, exp: typeof exp === 'number' && Number.isFinite(exp) ? exp : undefined };
  }

  return {
    async check(config, token) {
      if (token.length > MAX_TOKEN_LENGTH) throw new GatehouseError('TOKEN_REJECTED', 'access token not authorized: token too long');
      const key = `${config.cacheKey}:${digest('sha256', token, 'base64url')}`;
      if (cache.get(key, now())) return;
      let pending = inflight.get(key);
      if (!pending) {
        pending = introspect(config, token).finally(() => inflight.delete(key));
        inflight.set(key, pending);
      }
      let verdict: Verdict;
      try {
        verdict = await pending;
      } catch (err) {
        options.logger?.warn({ server: config.serverName, err: (err as Error).message }, 'token introspection unavailable, request refused');
        throw err;
      }
      const at = now();
      if (!verdict.active) throw new GatehouseError('TOKEN_REJECTED', 'access token not authorized: token inactive');
      if (verdict.exp !== undefined && verdict.exp + config.leeway <= at) {
        throw new GatehouseError('TOKEN_REJECTED', 'access token not authorized: token expired');
      }
      const cacheUntil = Math.min(verdict.exp ?? Infinity, at + config.cacheTtl);
      if (cacheUntil > at) cache.set(key, true, cacheUntil);
    },
    cachedCount: () => cache.size,
  };
}
