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
 * - An active answer whose `exp` is already past (beyond the leeway) counts as inactive; so does one whose `iss`
 *   differs from the server's `issuer`, or whose `aud` holds none of its `audiences`, when those are set: a member
 *   RFC 7662 leaves optional but the configuration asks for, absent, is a mismatch too (fail closed: the gateway
 *   cannot tell whom the token is for).
 * - The answer's grant (token-grant.ts: scope and scalar members) is cached with the verdict, for the route's plugin.
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
import { audienceMatches, grantOf, type TokenGrant } from './token-grant.js';

export interface Introspector {
  /** Resolves with the token's grant when it is active; rejects with TOKEN_REJECTED or TOKEN_INTROSPECTION_UNAVAILABLE. */
  check(config: CompiledIntrospection, token: string): Promise<TokenGrant>;
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
/**
 * A cached answer keeps its scopes and scalar members (token-grant.ts); one holding more (the response may be 64 KiB)
 * is answered but not cached, so the cache stays within cacheSize × this. As much as a jwt's 8 KiB token holds.
 */
const MAX_CACHED_GRANT = 8192;
/** Longer headers are not tokens anyone issued (as for jwt). */
const MAX_TOKEN_LENGTH = 8192;

type Verdict = { active: true; exp: number | undefined; grant: TokenGrant } | { active: false; reason: string };

function unavailable(config: CompiledIntrospection, reason: string, cause?: unknown): GatehouseError {
  return new GatehouseError('TOKEN_INTROSPECTION_UNAVAILABLE', `token introspection for oauth server ${config.serverName} failed: ${reason}`, {
    cause,
  });
}

export function createIntrospector(options: IntrospectorOptions): Introspector {
  const now = options.now ?? (() => Date.now() / 1000);
  /** key → the token counts as active until the deadline (seconds since epoch). */
  const cache = new DeadlineCache<TokenGrant>(options.cacheSize ?? DEFAULT_INTROSPECTION_CACHE_SIZE);
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
    const answer = json as Record<string, unknown>;
    if (answer.active !== true) return { active: false, reason: 'token inactive' };
    if (config.issuer !== undefined && answer.iss !== config.issuer) return { active: false, reason: 'issuer mismatch' };
    if (config.audiences !== undefined && !audienceMatches(answer.aud, config.audiences)) return { active: false, reason: 'audience mismatch' };
    const exp = answer.exp;
    return { active: true, exp: typeof exp === 'number' && Number.isFinite(exp) ? exp : undefined, grant: grantOf(answer) };
  }

  return {
    async check(config, token) {
      if (token.length > MAX_TOKEN_LENGTH) throw new GatehouseError('TOKEN_REJECTED', 'access token not authorized: token too long');
      const key = `${config.cacheKey}:${digest('sha256', token, 'base64url')}`;
      const cached = cache.get(key, now());
      if (cached) return cached;
      let pending = inflight.get(key);
      if (!pending) {
        pending = introspect(config, token).finally(() => inflight.delete(key));
        inflight.set(key, pending);
      }
      let verdict: Verdict;
      try {
        verdict = await pending;
      } catch (err) {
        options.logger?.warn({ server: config.serverName, err }, 'token introspection unavailable, request refused');
        throw err;
      }
      const at = now();
      if (!verdict.active) throw new GatehouseError('TOKEN_REJECTED', `access token not authorized: ${verdict.reason}`);
      if (verdict.exp !== undefined && verdict.exp + config.leeway <= at) {
        throw new GatehouseError('TOKEN_REJECTED', 'access token not authorized: token expired');
      }
      const cacheUntil = Math.min(verdict.exp ?? Infinity, at + config.cacheTtl);
      if (cacheUntil > at && verdict.grant.size <= MAX_CACHED_GRANT) cache.set(key, verdict.grant, cacheUntil);
      return verdict.grant;
    },
    cachedCount: () => cache.size,
  };
}
