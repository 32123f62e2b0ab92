/**
 * The one error type of Gatehouse and the one table that maps its codes to HTTP.
 * Admin responses render `{"error": message}`; the proxy renders its fixed JSON-string body.
 * Nothing else picks a status: library errors are translated into a GatehouseError at their
 * boundary (one function per library) and rendered here.
 */

interface ErrorRow {
  status: number;
  /** Fixed body of the gateway's own responses (the proxy listener); admin errors use the message. */
  gatewayBody?: string;
}

export const ERROR_TABLE = {
  // admin API
  VALIDATION_FAILED: { status: 400 },
  BAD_JSON: { status: 400 },
  BAD_PATH_ENCODING: { status: 400 },
  BODY_TOO_LARGE: { status: 413 },
  ADMIN_UNAUTHORIZED: { status: 401 },
  ADMIN_FORBIDDEN: { status: 403 },
  LOGIN_THROTTLED: { status: 429 },
  ROUTE_NOT_FOUND: { status: 404 },
  METHOD_NOT_ALLOWED: { status: 405 },
  API_NOT_FOUND: { status: 404 },
  API_NAME_TAKEN: { status: 409 },
  API_LISTEN_PATH_TAKEN: { status: 409 },
  OAUTH_SERVER_NOT_FOUND: { status: 404 },
  OAUTH_SERVER_NAME_TAKEN: { status: 409 },
  OAUTH_SERVER_IN_USE: { status: 409 },
  BASIC_AUTH_USER_NOT_FOUND: { status: 404 },
  BASIC_AUTH_USER_TAKEN: { status: 409 },
  KEY_AUTH_CREDENTIAL_NOT_FOUND: { status: 404 },
  KEY_AUTH_CREDENTIAL_TAKEN: { status: 409 },
  API_KEY_TAKEN: { status: 409 },
  CONFIG_VERSION_NOT_FOUND: { status: 404 },
  STORE_CONFLICT: { status: 409 },
  STORE_UNAVAILABLE: { status: 503 },
  INTERNAL: { status: 500, gatewayBody: 'internal server error' },
  // snapshot stream (sent as gRPC status UNAUTHENTICATED; the HTTP status is its usual equivalent)
  DATAPLANE_UNAUTHENTICATED: { status: 401 },
  // proxy listener
  NO_ROUTE: { status: 404, gatewayBody: 'no API found with those values' },
  AUTH_HEADER_MISSING: { status: 400, gatewayBody: 'authorization field missing' },
  BEARER_MALFORMED: { status: 400, gatewayBody: 'bearer token malformed' },
  TOKEN_REJECTED: { status: 401, gatewayBody: 'access token not authorized' },
  TOKEN_INTROSPECTION_UNAVAILABLE: { status: 503, gatewayBody: 'token introspection unavailable' },
  CREDENTIALS_REJECTED: { status: 401, gatewayBody: 'invalid credentials' },
  KEY_MISSING: { status: 401, gatewayBody: 'no API key found in request' },
  KEY_REJECTED: { status: 401, gatewayBody: 'invalid API key' },
  BAD_UPSTREAM_HOST: { status: 400, gatewayBody: 'invalid upstream host' },
  REQUEST_BODY_TOO_LARGE: { status: 413, gatewayBody: 'request body too large' },
  IP_FORBIDDEN: { status: 403, gatewayBody: 'client address not allowed' },
  RATE_LIMITED: { status: 429, gatewayBody: 'rate limit exceeded' },
  UPSTREAM_UNREACHABLE: { status: 502, gatewayBody: 'bad gateway' },
  UPSTREAM_TIMEOUT: { status: 504, gatewayBody: 'gateway timeout' },
  CIRCUIT_OPEN: { status: 503, gatewayBody: 'upstream circuit open' },
  NO_SNAPSHOT: { status: 503, gatewayBody: 'no configuration loaded' },
  UPGRADE_UNSUPPORTED: { status: 400, gatewayBody: 'only websocket upgrades are proxied' },
  BAD_REQUEST_HOST: { status: 400, gatewayBody: 'invalid host' },
} as const satisfies Record<string, ErrorRow>;

export type ErrorCode = keyof typeof ERROR_TABLE;

export class GatehouseError extends Error {
  readonly code: ErrorCode;
  /** Dotted path of the offending field for validation errors, e.g. `proxy.upstreams.targets[0].target`. */
  readonly field?: string;

  constructor(code: ErrorCode, message: string, options?: { field?: string; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'GatehouseError';
    this.code = code;
    this.field = options?.field;
  }

  get status(): number {
    return ERROR_TABLE[this.code].status;
  }
}

export function isGatehouseError(err: unknown): err is GatehouseError {
  return err instanceof GatehouseError;
}

export function statusOf(code: ErrorCode): number {
  return ERROR_TABLE[code].status;
}

/** Body the proxy listener sends for its own errors: a JSON string. */
export function gatewayBody(code: ErrorCode): string {
  const row: ErrorRow = ERROR_TABLE[code];
  return JSON.stringify(row.gatewayBody ?? 'internal server error');
}

/** Body the admin API sends for an error. */
export function adminBody(err: GatehouseError): string {
  return JSON.stringify({ error: err.message });
}

/** 5xx is logged at error, everything else lower (fastify's rule). */
export function logLevelOf(code: ErrorCode): 'error' | 'info' {
  return statusOf(code) >= 500 ? 'error' : 'info';
}
