/**
 * HTTP field syntax that definitions (proxy-schema.ts: methods, health-check probe headers) and plugin configs
 * (plugins/http-syntax.ts) share; a leaf module, so that both may import it.
 */
import { z } from 'zod';

/** RFC 7230 token (tchar+): what an HTTP method or a header name may be. */
export const HTTP_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** RFC 9110 §7.6.1 hop-by-hop headers: they stop at the gateway in both directions. */
export const HOP_BY_HOP_HEADERS: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** Node's own rule for header values: no CR, LF, NUL or other control characters except tab. */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

export const headerNameSchema = z.string().min(1, 'must not be empty').regex(HTTP_TOKEN, 'is not a valid header name');

export const headerValueSchema = z.string().regex(HEADER_VALUE, 'must not contain control characters (CR, LF, NUL)');
