/**
 * storage token strategy (docs/oauth2.md "OAuth 2.0"): watch a server's token and revoke endpoints while the proxy streams them,
 * and keep the token store in step. Bodies are copied up to a bound; the client sees the bytes unchanged.
 */
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';
import type { Logger } from '#proto/logger';
import type { EndpointObserver } from './index.js';
import type { TokenStore } from './token-store.js';

/** Token requests and responses are small; anything larger is not one we need to read. */
export const OBSERVED_BODY_LIMIT = 64 * 1024;
/** TTL for a token response with neither `expires_in` nor the server's `default_ttl`. */
export const DEFAULT_TOKEN_TTL = 3600;

export type ObserverLogger = Pick<Logger, 'warn' | 'debug'>;

export interface TokenObserverOptions {
  server: string;
  endpoint: 'token' | 'revoke';
  store: TokenStore;
  /** `token_strategy.settings.default_ttl` of the server, when set. */
  defaultTtl?: number;
  logger: ObserverLogger;
}

class BoundedBody {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  overflowed = false;

  add(chunk: Buffer): void {
    if (this.overflowed) return;
    this.size += chunk.length;
    if (this.size > OBSERVED_BODY_LIMIT) {
      this.overflowed = true;
      this.chunks.length = 0;
      return;
    }
    this.chunks.push(Buffer.from(chunk)); // a copy: the proxy may reuse its buffers
  }

  bytes(): Buffer | null {
    return this.overflowed ? null : Buffer.concat(this.chunks);
  }
}

type Headers = Record<string, string | string[] | undefined>;

function header(headers: Headers, name: string): string {
  const value = headers[name];
  return (Array.isArray(value) ? value[0] : (value ?? '')).toLowerCase();
}

/** Request parameters: form-urlencoded (RFC 6749) or, leniently, a JSON object. Only string values count. */
export function parseParams(body: Buffer): Map<string, string> {
  const text = body.toString('utf8').trim();
  const params = new Map<string, string>();
  if (text.startsWith('{') || text.startsWith('[')) {
    try {
      const parsed: unknown = JSON.parse(text);
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
        for (const [k, v] of Object.entries(parsed)) if (typeof v === 'string') params.set(k, v);
      }
    } catch {
      // not JSON after all: nothing to read
    }
    return params;
  }
  for (const [k, v] of new URLSearchParams(text)) if (!params.has(k)) params.set(k, v);
  return params;
}

function decode(body: Buffer, encoding: string): Buffer {
  const bounded = { maxOutputLength: OBSERVED_BODY_LIMIT };
  switch (encoding) {
    case '':
    case 'identity':
      return body;
    case 'gzip':
    case 'x-gzip':
      return gunzipSync(body, bounded);
    case 'deflate':
      return inflateSync(body, bounded);
    case 'br':
      return brotliDecompressSync(body, bounded);
    default:
      throw new Error(`unsupported content-encoding ${encoding}`);
  }
}

/** `expires_in` as a positive number of seconds (numeric strings accepted), else undefined. */
export function ttlOf(expiresIn: unknown): number | undefined {
  const n = typeof expiresIn === 'string' && expiresIn.trim() !== '' ? Number(expiresIn) : expiresIn;
  return typeof n === 'number' && Number.isFinite(n) && n > 0 ? n : undefined;
}

function nonEmptyString(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

export function createTokenObserver(options: TokenObserverOptions): EndpointObserver {
  const { server, store, logger } = options;
  const request = new BoundedBody();
  const response = new BoundedBody();
  let status = 0;
  let responseHeaders: Headers = {};

  async function onTokenResponse(): Promise<void> {
    if (!header(responseHeaders, 'content-type').includes('json')) return;
    const raw = response.bytes();
    if (!raw) return;
    const parsed: unknown = JSON.parse(decode(raw, header(responseHeaders, 'content-encoding').trim()).toString('utf8'));
    if (!parsed || typeof parsed !== 'object') return;
    const body = parsed as Record<string, unknown>;
    const accessToken = nonEmptyString(body.access_token);
    if (!accessToken) return;
    const ttl = ttlOf(body.expires_in) ?? options.defaultTtl ?? DEFAULT_TOKEN_TTL;

    const requestBody = request.bytes();
    const params = requestBody ? parseParams(requestBody) : new Map<string, string>();
    const usedRefresh = params.get('grant_type') === 'refresh_token' ? nonEmptyString(params.get('refresh_token')) : undefined;
    if (usedRefresh) {
      // Delete before storing: a server that re-issues the same access token keeps it.
      const previous = await store.accessForRefresh(server, usedRefresh);
      if (previous) await store.delete(server, previous);
      await store.deleteRefresh(server, usedRefresh);
    }
    await store.put(server, accessToken, ttl);
    const newRefresh = nonEmptyString(body.refresh_token);
    // The link only serves to remove the access token later, so it needs to live no longer than that token.
    if (newRefresh) await store.linkRefresh(server, newRefresh, accessToken, ttl);
  }

  async function onRevokeResponse(): Promise<void> {
    const requestBody = request.bytes();
    const token = requestBody ? nonEmptyString(parseParams(requestBody).get('token')) : undefined;
    if (!token) return;
    // RFC 7009: `token` may be an access or a refresh token; a refresh token takes its access token with it.
    await store.delete(server, token);
    const linked = await store.accessForRefresh(server, token);
    if (linked) await store.delete(server, linked);
    await store.deleteRefresh(server, token);
  }

  return {
    requestChunk(chunk) {
      request.add(chunk);
    },
    response(s, headers) {
      status = s;
      responseHeaders = headers;
    },
    responseChunk(chunk) {
      if (options.endpoint === 'token') response.add(chunk);
    },
    async finish() {
      if (status < 200 || status > 299) return;
      try {
        if (options.endpoint === 'token') await onTokenResponse();
        else await onRevokeResponse();
      } catch (err) {
        logger.warn({ server, endpoint: options.endpoint, err }, 'token store not updated');
      }
    },
  };
}
