/**
 * One call of the gateway's own to an identity provider (token introspection, a JWKS or discovery fetch, a code exchange) through the
 * proxy's upstream pools: `timeout` bounds the whole call (connect, headers, body), only a 200 counts, and
 * the body is read up to `maxBytes` and must parse as a JSON object. Every failure is `fail(reason)`.
 */
import type { Dispatcher } from 'undici';
import { isGatehouseError, type GatehouseError } from '#proto/errors';
import { withDeadline } from '../with-deadline.js';

/** Where connections come from: the proxy's upstream pools (proxy/upstream-pools.ts) fit. */
export interface CallPools {
  get(origin: string, options: { dialTimeoutMs: number; insecureSkipVerify: boolean }): Dispatcher;
}

export interface JsonCall {
  origin: string;
  /** Path plus query. */
  path: string;
  method: 'GET' | 'POST';
  headers: Readonly<Record<string, string>>;
  body?: string;
  timeoutMs: number;
  dialTimeoutMs: number;
  insecureSkipVerify: boolean;
  maxBytes: number;
  /** What was called, for reasons: `<label> answered 503`. */
  label: string;
}

async function readJson(body: Dispatcher.ResponseData['body'], call: JsonCall, fail: (reason: string, cause?: unknown) => GatehouseError): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > call.maxBytes) {
      body.on('error', () => undefined).destroy();
      throw fail(`response over ${call.maxBytes} bytes`);
    }
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (err) {
    throw fail('response is not JSON', err);
  }
}

/** Resolves with the parsed JSON object; rejects with `fail(reason)`. */
export async function callJson(pools: CallPools, call: JsonCall, fail: (reason: string, cause?: unknown) => GatehouseError): Promise<Record<string, unknown>> {
  let json: unknown;
  try {
    json = await withDeadline(
      call.timeoutMs,
      () => new DOMException(`${call.label} timed out`, 'TimeoutError'),
      async (signal) => {
        const pool = pools.get(call.origin, { dialTimeoutMs: call.dialTimeoutMs, insecureSkipVerify: call.insecureSkipVerify });
        const res = await pool.request({
          method: call.method,
          path: call.path,
          headers: call.headers,
          body: call.body,
          signal,
          headersTimeout: call.timeoutMs,
          bodyTimeout: call.timeoutMs,
        });
        if (res.statusCode !== 200) {
          res.body.on('error', () => undefined).destroy();
          throw fail(`${call.label} answered ${res.statusCode}`);
        }
        return readJson(res.body, call, fail);
      },
    );
  } catch (err) {
    if (isGatehouseError(err)) throw err;
    const e = err as { name?: string; code?: string; message?: string };
    throw fail(e?.name === 'TimeoutError' ? `no answer within ${call.timeoutMs} ms` : (e?.code ?? e?.message ?? String(err)), err);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw fail('response is not a JSON object');
  return json as Record<string, unknown>;
}

/**
 * A GET of a document an identity provider publishes (a JWKS, a discovery document): `timeoutMs` bounds the dial
 * too, and the provider's certificate is always checked.
 */
export function getJsonDocument(
  pools: CallPools,
  doc: Pick<JsonCall, 'origin' | 'path' | 'timeoutMs' | 'maxBytes' | 'label'> & { accept: string },
  fail: (reason: string, cause?: unknown) => GatehouseError,
): Promise<Record<string, unknown>> {
  const { accept, ...call } = doc;
  return callJson(pools, { ...call, method: 'GET', headers: { accept }, dialTimeoutMs: doc.timeoutMs, insecureSkipVerify: false }, fail);
}

/** What a cached document (a JWKS, a discovery document) remembers of its fetches. */
export interface FetchState {
  /** When the last fetch started (ms), whatever its outcome. */
  attemptedAt: number;
  inflight?: Promise<void>;
}

/**
 * Starts `load` unless a fetch is in flight (its promise is shared) or `cooldownMs` has not passed since the last
 * start (undefined): whatever asks, at most one call per cooldown reaches the identity provider. `load` must not reject.
 */
export function fetchAtMostEvery(state: FetchState, cooldownMs: number, at: number, load: () => Promise<void>): Promise<void> | undefined {
  if (state.inflight) return state.inflight;
  if (at - state.attemptedAt < cooldownMs) return undefined;
  state.attemptedAt = at;
  const pending = load().finally(() => {
    state.inflight = undefined;
  });
  state.inflight = pending;
  return pending;
}
