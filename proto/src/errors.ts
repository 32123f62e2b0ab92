/**
 * The one error type of Gatehouse and the one table that maps its codes to HTTP (and, for the proxy
 * listener's, to gRPC). Admin responses render `{"error": message}`; the proxy renders its fixed
 * JSON-string body, or for a gRPC request a Trailers-Only answer with that text as grpc-message.
 * Nothing else picks a status: library errors are translated into a GatehouseError at their
 * boundary (one function per library) and rendered here.
 */

/**
 * gRPC status codes (grpc/grpc doc/statuscodes.md) the proxy's errors map to. The table's column follows
 * that document's meaning of each code, not its HTTP-to-gRPC table (doc/http-grpc-status-mapping.md maps by
 * status alone: a 400 would be INTERNAL, a 504 UNAVAILABLE, a 413 UNKNOWN): what a gRPC client does next
 * (fix the call, authenticate, back off, retry elsewhere) hangs on it. So: no route is a method nobody
 * implements (UNIMPLEMENTED, what a gRPC server answers for an unknown method); a missing or malformed
 * credential is UNAUTHENTICATED like a rejected one, whatever its HTTP status; a body over `body_limit` is
 * RESOURCE_EXHAUSTED, gRPC's own answer to a message over the receiver's limit; an upstream the gateway
 * cannot use right now (unreachable, circuit open, no configuration, no introspection, no JWKS) is UNAVAILABLE, the
 * one code clients retry by default.
 */
export const GRPC_STATUS = {
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

type GrpcStatus = (typeof GRPC_STATUS)[keyof typeof GRPC_STATUS];

/** An error the proxy listener answers has both its body's text and its gRPC status; the others neither. */
type ErrorRow =
  | { status: number; gatewayBody?: never; grpcStatus?: never; detailed?: never }
  | {
      status: number;
      /** Fixed body of the gateway's own responses (the proxy listener); admin errors use the message. */
      gatewayBody: string;
      /** The same refusal to a gRPC client (grpc-status). */
      grpcStatus: GrpcStatus;
      /**
       * The proxy sends the error's message instead of `gatewayBody` (request_validator's: which part of the body is
       * wrong and why). Whoever throws one builds the message from the configuration and the body's shape (a JSON
       * pointer), never from the values the client sent.
       */
      detailed?: true;
    };

const { INVALID_ARGUMENT, DEADLINE_EXCEEDED, PERMISSION_DENIED, RESOURCE_EXHAUSTED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, UNAUTHENTICATED } = GRPC_STATUS;

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
  CONFIG_CHANGED: { status: 412 },
  SECRET_REF_NOT_FOUND: { status: 400 },
  STORE_UNAVAILABLE: { status: 503 },
  INTERNAL: { status: 500, gatewayBody: 'internal server error', grpcStatus: INTERNAL },
  // snapshot stream (sent as gRPC status UNAUTHENTICATED; the HTTP status is its usual equivalent)
  DATAPLANE_UNAUTHENTICATED: { status: 401 },
  // proxy listener
  NO_ROUTE: { status: 404, gatewayBody: 'no API found with those values', grpcStatus: UNIMPLEMENTED },
  AUTH_HEADER_MISSING: { status: 400, gatewayBody: 'authorization field missing', grpcStatus: UNAUTHENTICATED },
  BEARER_MALFORMED: { status: 400, gatewayBody: 'bearer token malformed', grpcStatus: UNAUTHENTICATED },
  TOKEN_REJECTED: { status: 401, gatewayBody: 'access token not authorized', grpcStatus: UNAUTHENTICATED },
  TOKEN_INTROSPECTION_UNAVAILABLE: { status: 503, gatewayBody: 'token introspection unavailable', grpcStatus: UNAVAILABLE },
  JWKS_UNAVAILABLE: { status: 503, gatewayBody: 'token signing keys unavailable', grpcStatus: UNAVAILABLE },
  CREDENTIALS_REJECTED: { status: 401, gatewayBody: 'invalid credentials', grpcStatus: UNAUTHENTICATED },
  CREDENTIALS_CHECK_BUSY: { status: 503, gatewayBody: 'credential check busy; retry later', grpcStatus: UNAVAILABLE },
  CREDENTIALS_AMBIGUOUS: { status: 400, gatewayBody: 'more than one credential in request', grpcStatus: INVALID_ARGUMENT },
  KEY_MISSING: { status: 401, gatewayBody: 'no API key found in request', grpcStatus: UNAUTHENTICATED },
  KEY_REJECTED: { status: 401, gatewayBody: 'invalid API key', grpcStatus: UNAUTHENTICATED },
  SIGN_IN_REQUIRED: { status: 401, gatewayBody: 'sign-in required', grpcStatus: UNAUTHENTICATED },
  SIGN_IN_CALLBACK_INVALID: { status: 400, gatewayBody: 'invalid sign-in callback', grpcStatus: UNAUTHENTICATED },
  IDENTITY_PROVIDER_UNAVAILABLE: { status: 503, gatewayBody: 'identity provider unavailable', grpcStatus: UNAVAILABLE },
  BAD_UPSTREAM_HOST: { status: 400, gatewayBody: 'invalid upstream host', grpcStatus: INVALID_ARGUMENT },
  REQUEST_BODY_TOO_LARGE: { status: 413, gatewayBody: 'request body too large', grpcStatus: RESOURCE_EXHAUSTED },
  REQUEST_INVALID: { status: 400, gatewayBody: 'request invalid', grpcStatus: INVALID_ARGUMENT, detailed: true },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, gatewayBody: 'unsupported request content type', grpcStatus: INVALID_ARGUMENT },
  IP_FORBIDDEN: { status: 403, gatewayBody: 'client address not allowed', grpcStatus: PERMISSION_DENIED },
  ACL_FORBIDDEN: { status: 403, gatewayBody: 'you cannot consume this service', grpcStatus: PERMISSION_DENIED },
  INSUFFICIENT_SCOPE: { status: 403, gatewayBody: 'insufficient scope', grpcStatus: PERMISSION_DENIED },
  RATE_LIMITED: { status: 429, gatewayBody: 'rate limit exceeded', grpcStatus: RESOURCE_EXHAUSTED },
  UPSTREAM_UNREACHABLE: { status: 502, gatewayBody: 'bad gateway', grpcStatus: UNAVAILABLE },
  UPSTREAM_TIMEOUT: { status: 504, gatewayBody: 'gateway timeout', grpcStatus: DEADLINE_EXCEEDED },
  CIRCUIT_OPEN: { status: 503, gatewayBody: 'upstream circuit open', grpcStatus: UNAVAILABLE },
  NO_ENDPOINTS: { status: 503, gatewayBody: 'upstream service has no ready endpoints', grpcStatus: UNAVAILABLE },
  NO_SNAPSHOT: { status: 503, gatewayBody: 'no configuration loaded', grpcStatus: UNAVAILABLE },
  UPGRADE_UNSUPPORTED: { status: 400, gatewayBody: 'only websocket upgrades are proxied', grpcStatus: UNIMPLEMENTED },
  BAD_REQUEST_HOST: { status: 400, gatewayBody: 'invalid host', grpcStatus: INVALID_ARGUMENT },
  AMBIGUOUS_PATH: { status: 400, gatewayBody: 'ambiguous request path', grpcStatus: INVALID_ARGUMENT },
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

/** Body the proxy listener sends for `err`: its code's fixed text, or its message for a `detailed` code. */
export function gatewayBodyOf(err: GatehouseError): string {
  const row: ErrorRow = ERROR_TABLE[err.code];
  return row.detailed ? JSON.stringify(err.message) : gatewayBody(err.code);
}

/** grpc-status and grpc-message of the proxy's own answer to a gRPC request: its code's status and body text. */
export function gatewayGrpcStatus(code: ErrorCode): { 'grpc-status': string; 'grpc-message': string } {
  const row: ErrorRow = ERROR_TABLE[code];
  return { 'grpc-status': String(row.grpcStatus ?? GRPC_STATUS.INTERNAL), 'grpc-message': grpcMessage(row.gatewayBody ?? 'internal server error') };
}

/**
 * grpc-status and grpc-message of a plugin's answer (request_termination, redirect) to a gRPC request. The answer is
 * an HTTP status the operator chose, not one of the gateway's refusals, so its code is gRPC's own HTTP-to-gRPC
 * mapping (doc/http-grpc-status-mapping.md, what a client makes of a non-gRPC HTTP response):
 *
 * | HTTP              | gRPC              |
 * |-------------------|-------------------|
 * | 400               | INTERNAL          |
 * | 401               | UNAUTHENTICATED   |
 * | 403               | PERMISSION_DENIED |
 * | 404               | UNIMPLEMENTED     |
 * | 429, 502–504      | UNAVAILABLE       |
 * | any other, 2xx too | UNKNOWN          |
 *
 * A 2xx is UNKNOWN as well: its body is no gRPC message, so the call cannot have succeeded (an OK without the
 * response message would be a lie the client's stub fails on later, with less to go on).
 */
export function answerGrpcStatus(status: number, message: string): { 'grpc-status': string; 'grpc-message': string } {
  const code = HTTP_GRPC_STATUS.get(status) ?? GRPC_STATUS.UNKNOWN;
  return { 'grpc-status': String(code), 'grpc-message': grpcMessage(message) };
}

const HTTP_GRPC_STATUS = new Map<number, GrpcStatus>([
  [400, INTERNAL],
  [401, UNAUTHENTICATED],
  [403, PERMISSION_DENIED],
  [404, UNIMPLEMENTED],
  [429, UNAVAILABLE],
  [502, UNAVAILABLE],
  [503, UNAVAILABLE],
  [504, UNAVAILABLE],
]);

/** gRPC's Status-Message encoding (PROTOCOL-HTTP2.md): UTF-8, each byte outside %x20-%x7E, and `%` itself, as %XX. */
export function grpcMessage(text: string): string {
  let encoded = '';
  for (const byte of Buffer.from(text)) {
    encoded += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return encoded;
}

/** Body the admin API sends for an error. */
export function adminBody(err: GatehouseError): string {
  return JSON.stringify({ error: err.message });
}

/** 5xx is logged at error, everything else lower (fastify's rule). */
export function logLevelOf(code: ErrorCode): 'error' | 'info' {
  return statusOf(code) >= 500 ? 'error' : 'info';
}
