/**
 * The one place where undici and socket errors become gateway errors, by `err.code`
 * (undici docs: branch on the code, never on the message).
 */
import { GatehouseError } from '#proto/errors';

const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT']);

/**
 * Timeouts → UPSTREAM_TIMEOUT (504). Everything else (ECONNREFUSED, ECONNRESET, ENOTFOUND,
 * EAI_AGAIN, UND_ERR_SOCKET, TLS verification failures, ...) → UPSTREAM_UNREACHABLE (502).
 */
export function upstreamError(err: unknown): GatehouseError {
  if (err instanceof GatehouseError) return err;
  const code = codeOf(err);
  if (code !== undefined && TIMEOUT_CODES.has(code)) {
    return new GatehouseError('UPSTREAM_TIMEOUT', `upstream timed out (${code})`, { cause: err });
  }
  return new GatehouseError('UPSTREAM_UNREACHABLE', `upstream unreachable (${code ?? 'unknown'})`, { cause: err });
}

/** undici wraps some failures (e.g. AggregateError of a dual-stack connect): use the first coded one. */
function codeOf(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') return code;
  if (err instanceof AggregateError) {
    for (const inner of err.errors) {
      const innerCode = codeOf(inner);
      if (innerCode) return innerCode;
    }
  }
  const cause = (err as { cause?: unknown }).cause;
  return cause !== undefined && cause !== err ? codeOf(cause) : undefined;
}
