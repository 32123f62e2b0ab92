/**
 * JWKS key sets of jwt servers with a `jwks_uri` (docs/oauth2.md "OAuth 2.0"), fetched by this data plane itself
 * through the proxy's upstream pools. One instance per process (main.ts): a set outlives snapshots, shared
 * by every server (and snapshot) with the same compiled settings (CompiledJwks.cacheKey).
 *
 * - At most one fetch per `cooldown`, whatever asks for it (a refresh, an unknown kid, no set yet), and
 *   concurrent askers share the fetch in flight: a flood of forged kids, or of tokens while the IdP is
 *   down, makes no more than one request per cooldown.
 * - A set older than `cache_ttl` is refreshed in the background; requests go on with it meanwhile.
 * - A failed fetch (unreachable, slower than `timeout`, not 200, over 256 KiB, not a JSON object with a
 *   `keys` array, a refused set: see proto/src/compile/jwks.ts) keeps the last good set, for at most
 *   `max_stale` after it was fetched; then it is dropped.
 * - No set (none fetched yet, or dropped) → JWKS_UNAVAILABLE (503): the token may well be valid.
 *   A set without the token's kid, the refetch it allows done → the verifier's TOKEN_REJECTED (401).
 */
import { GatehouseError, isGatehouseError } from '#proto/errors';
import { parseJwks } from '#proto/compile/jwks';
import type { CompiledJwks, CompiledJwtKey } from '#proto/compile/index';
import type { Logger } from '#proto/logger';
import { getJsonDocument, fetchAtMostEvery, type CallPools, type FetchState } from './json-call.js';
import type { FetchMetrics } from './fetch-metrics.js';

export interface JwksCache {
  /**
   * The keys of `config`'s set for a token's alg and kid (every key of that alg when the token names no kid).
   * Synchronous when the held set answers; a promise when it waits for a fetch. Rejects (or throws) JWKS_UNAVAILABLE
   * when there is no set.
   */
  keysFor(config: CompiledJwks, alg: string, kid: string | undefined): CompiledJwtKey[] | Promise<CompiledJwtKey[]>;
  /** Fetches the sets of a new snapshot's servers not held yet; forgets those no longer configured. */
  retain(configs: readonly CompiledJwks[]): void;
  /** Each server of the last `retain` and how many keys its set holds now (0 without one, or past max_stale). */
  heldKeys(): Iterable<readonly [server: string, keys: number]>;
}

export interface JwksCacheOptions {
  pools: CallPools;
  /** Milliseconds since epoch; injectable so tests move time instead of sleeping. */
  now?: () => number;
  logger?: Pick<Logger, 'warn' | 'info'>;
  metrics?: Pick<FetchMetrics, 'jwksFetch'>;
}

/** A JWKS is a few keys (~1.5 KiB per RSA-4096 key); more is not one. */
export const MAX_JWKS_BYTES = 256 * 1024;

interface KeySet extends FetchState {
  keys?: CompiledJwtKey[];
  /** When `keys` was fetched (ms). */
  fetchedAt: number;
  lastError?: string;
}

function unavailable(config: CompiledJwks, reason: string, cause?: unknown): GatehouseError {
  return new GatehouseError('JWKS_UNAVAILABLE', `JWKS of oauth server ${config.serverName} unavailable: ${reason}`, { cause });
}

const matching = (keys: readonly CompiledJwtKey[], alg: string, kid: string | undefined) =>
  keys.filter((k) => k.alg === alg && (kid === undefined || k.kid === kid));

export function createJwksCache(options: JwksCacheOptions): JwksCache {
  const now = options.now ?? Date.now;
  const sets = new Map<string, KeySet>();
  /** The configs of the last retain, one per server (servers with the same settings share a set): the gauge reads them. */
  let servers: readonly CompiledJwks[] = [];

  const setOf = (config: CompiledJwks): KeySet => {
    let set = sets.get(config.cacheKey);
    if (!set) {
      set = { fetchedAt: -Infinity, attemptedAt: -Infinity };
      sets.set(config.cacheKey, set);
    }
    return set;
  };

  async function load(config: CompiledJwks, set: KeySet): Promise<void> {
    try {
      const body = await getJsonDocument(
        options.pools,
        {
          origin: config.origin,
          path: config.path,
          accept: 'application/jwk-set+json, application/json',
          timeoutMs: config.timeoutMs,
          maxBytes: MAX_JWKS_BYTES,
          label: 'JWKS URI',
        },
        (reason, cause) => unavailable(config, reason, cause),
      );
      const parsed = parseJwks(body, config.algs);
      set.keys = parsed.keys;
      set.fetchedAt = now();
      set.lastError = undefined;
      options.metrics?.jwksFetch('ok');
      options.logger?.[parsed.ignored.some((j) => j.broken) ? 'warn' : 'info'](
        { server: config.serverName, uri: config.uri, keys: parsed.keys.length, ignored: parsed.ignored },
        'JWKS fetched',
      );
    } catch (err) {
      // The whole message, prefixed once: a refused set's reason comes from parseJwks, a failed call's from callJson (json-call.ts).
      set.lastError = isGatehouseError(err) ? err.message : unavailable(config, err instanceof Error ? err.message : String(err)).message;
      options.metrics?.jwksFetch('failed');
      options.logger?.warn({ server: config.serverName, uri: config.uri, err: set.lastError, serving: set.keys !== undefined }, 'JWKS fetch failed');
    }
  }

  /** Starts a fetch unless one is in flight or the cooldown since the last one has not passed; never rejects. */
  const refresh = (config: CompiledJwks, set: KeySet, at: number) => fetchAtMostEvery(set, config.cooldownMs, at, () => load(config, set));

  function held(config: CompiledJwks, set: KeySet, at: number): CompiledJwtKey[] | undefined {
    if (set.keys && at - set.fetchedAt > config.maxStaleMs) {
      options.logger?.warn({ server: config.serverName, uri: config.uri, maxStaleMs: config.maxStaleMs }, 'JWKS older than max_stale dropped');
      set.keys = undefined;
    }
    return set.keys;
  }

  function noSet(config: CompiledJwks, set: KeySet): never {
    throw set.lastError ? new GatehouseError('JWKS_UNAVAILABLE', set.lastError) : unavailable(config, 'no key set fetched yet');
  }

  return {
    keysFor(config, alg, kid) {
      const set = setOf(config);
      const at = now();
      const keys = held(config, set, at);
      if (!keys) {
        const pending = refresh(config, set, at);
        if (!pending) noSet(config, set);
        return pending.then(() => matching(set.keys ?? noSet(config, set), alg, kid));
      }
      if (at - set.fetchedAt >= config.cacheTtlMs) void refresh(config, set, at);
      const found = matching(keys, alg, kid);
      if (found.length > 0) return found;
      // A kid (or alg) the set lacks: perhaps a key the IdP added since; the cooldown bounds how often that is asked.
      const pending = refresh(config, set, at);
      return pending ? pending.then(() => matching(set.keys ?? keys, alg, kid)) : found;
    },
    retain(configs) {
      servers = configs;
      const wanted = new Set(configs.map((c) => c.cacheKey));
      for (const key of sets.keys()) if (!wanted.has(key)) sets.delete(key);
      for (const config of configs) {
        const set = setOf(config);
        if (!set.keys) void refresh(config, set, now());
      }
    },
    *heldKeys() {
      const at = now();
      for (const config of servers) {
        const set = sets.get(config.cacheKey);
        yield [config.serverName, set?.keys && at - set.fetchedAt <= config.maxStaleMs ? set.keys.length : 0] as const;
      }
    },
  };
}
