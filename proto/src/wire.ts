// Generated from proto/gatehouse/v1/gatehouse.proto by scripts/generate-wire-types.mjs (`npm run generate`): do not edit.
/**
 * The messages as both services hold them, converted by proto/src/grpc.ts (CONVERSION): field names
 * as in the .proto, every field present (an unset message field null, an unset list empty), 64-bit
 * integers as numbers, and the member a oneof holds named by a field of the oneof's name.
 */

export interface DataPlaneMessage {
  hello?: Hello;
  ack?: Ack;
  nack?: Nack;
  /** Which member of `kind` is set. */
  kind?: 'hello' | 'ack' | 'nack';
}

export interface Hello {
  id: string;
  hostname: string;
  /** Version and hash of the snapshot the DP already holds (0 / "" when none). */
  version: number;
  hash: string;
  /** Address the DP serves proxy traffic on, for GET /dataplanes. */
  proxy_address: string;
  software_version: string;
  /** The DP applies SnapshotDelta pushes; without it the CP sends only full snapshots. */
  accepts_deltas: boolean;
}

export interface Ack {
  version: number;
  nonce: string;
}

export interface Nack {
  version: number;
  nonce: string;
  error: string;
}

export interface SnapshotPush {
  /** Per-stream increasing; an ACK/NACK counts only when it echoes the last one sent. */
  nonce: string;
  snapshot?: Snapshot;
  delta?: SnapshotDelta;
  /** Which member of `content` is set. */
  content?: 'snapshot' | 'delta';
}

/**
 * The changes from version base_version (content hash base_hash) to version: definitions added
 * or changed (whole, as in Snapshot) and names removed. The DP applies it only on top of exactly
 * that base, and only if its content then hashes to `hash`; otherwise it NACKs and the CP sends
 * the full snapshot.
 */
export interface SnapshotDelta {
  base_version: number;
  base_hash: string;
  version: number;
  /** Hash of the whole content after applying (as Snapshot.hash). */
  hash: string;
  apis: ApiDefinition[];
  oauth_servers: OAuthServer[];
  basic_auth_credentials: BasicAuthCredential[];
  removed_apis: string[];
  removed_oauth_servers: string[];
  removed_basic_auth_credentials: string[];
  key_auth_credentials: KeyAuthCredential[];
  removed_key_auth_credentials: string[];
  /** As Snapshot.key_auth_hash_key, for the content after applying (the DP does not keep the base's). */
  key_auth_hash_key: string;
  /** As Snapshot.gateway_tls, for the content after applying; absent = the base's, unchanged. */
  gateway_tls: GatewayTls | null;
}

export interface Snapshot {
  version: number;
  /** sha256 hex over each kind's count and sum of per-definition hashes, in any list order (proto/src/snapshot/codec.ts). */
  hash: string;
  apis: ApiDefinition[];
  oauth_servers: OAuthServer[];
  /** basic_auth users, sorted by username; omitted when there are none (the hash is the same either way). */
  basic_auth_credentials: BasicAuthCredential[];
  /** key_auth credentials, sorted by username; omitted when there are none (the hash is the same either way). */
  key_auth_credentials: KeyAuthCredential[];
  /**
   * The installation key of the key_auth hashes ("hmac-sha256$" + HMAC-SHA256(this, key)), as its text;
   * set exactly when key_auth_credentials is not empty, and then covered by `hash` (proto/src/snapshot/hash.ts).
   */
  key_auth_hash_key: string;
  /**
   * The Gateway API HTTPS listeners the data planes serve on GATEWAY_HTTPS_PORT, with their private keys;
   * absent when there are none, and then not covered by `hash` (proto/src/snapshot/hash.ts).
   */
  gateway_tls: GatewayTls | null;
}

export interface GatewayTls {
  /** Sorted by name. */
  listeners: GatewayListenerTls[];
}

/** An HTTPS listener (tls.mode Terminate) of a Gateway, its certificateRefs resolved. */
export interface GatewayListenerTls {
  /** "<namespace>/<gateway>/<listener>". */
  name: string;
  /** The listener's hostname, matched against the TLS SNI ("shop.example.com", "*.example.com"); "" = any. */
  hostname: string;
  port: number;
  /** One per certificateRef, in its order (an RSA and an ECDSA pair, say). */
  certificates: TlsCertificate[];
}

export interface TlsCertificate {
  /** PEM: the certificate, then its chain (a Secret's tls.crt). */
  certificate_chain: string;
  /** PEM (a Secret's tls.key). */
  private_key: string;
}

export interface ApiDefinition {
  name: string;
  active: boolean;
  hosts: string[];
  proxy: Proxy | null;
  plugins: Plugin[];
}

export interface Proxy {
  /** Empty when the API routes on hosts and/or methods only. */
  listen_path: string;
  upstreams: Upstreams | null;
  methods: string[];
  strip_path: boolean;
  append_path: boolean;
  preserve_host: boolean;
  insecure_skip_verify: boolean;
  forwarding_timeouts: ForwardingTimeouts | null;
  /** Header conditions: lower-cased name → accepted values (sorted); empty when the route has none. */
  match_headers: Record<string, StringList>;
  /** Request paths holding %2F or %5C are forwarded (refused with AMBIGUOUS_PATH otherwise). */
  allow_encoded_slashes: boolean;
}

export interface ForwardingTimeouts {
  /** Duration strings as stored ("5s", "250ms"). */
  dial_timeout: string;
  response_header_timeout: string;
}

export interface Upstreams {
  balancing: string;
  targets: Target[];
  /** Absent when the targets are not health-checked. */
  health_check: HealthCheck | null;
  /** "http2" (h2c or h2 by ALPN to the targets), or "" for HTTP/1.1 ("http1" when the definition says so). */
  protocol: string;
  /** Set with balancing "hash" only. */
  hash_on: HashOn | null;
}

/** What balancing "hash" hashes. */
export interface HashOn {
  /** "ip", "header" or "cookie". */
  source: string;
  /** The header (lower-cased) or cookie name; "" for "ip". */
  name: string;
  /** "ip" only: the client's address from X-Forwarded-For / X-Real-IP, as rate_limit's. */
  trust_forward_headers: boolean;
}

/** At least one of the two is set. */
export interface HealthCheck {
  active: ActiveHealthCheck | null;
  passive: PassiveHealthCheck | null;
}

/** Durations as stored ("10s", "500ms"). */
export interface ActiveHealthCheck {
  path: string;
  interval: string;
  timeout: string;
  healthy_threshold: number;
  unhealthy_threshold: number;
  /** "" = GET; empty statuses = 2xx/3xx; no headers = none beyond Host and User-Agent. */
  method: string;
  statuses: number[];
  headers: Record<string, string>;
  /** Set for gRPC's health protocol instead of an HTTP probe (path then ""). */
  grpc: GrpcHealthCheck | null;
}

export interface GrpcHealthCheck {
  /** "" = the whole server. */
  service: string;
}

export interface PassiveHealthCheck {
  unhealthy_threshold: number;
  ejection: string;
  /** Empty = 502, 503, 504. */
  statuses: number[];
}

export interface Target {
  target: string;
  weight: number;
  /** What a host filled in from placeholders must match (anchored, case-insensitive); "" = one DNS label per placeholder. */
  host_pattern: string;
}

export interface Plugin {
  name: string;
  enabled: boolean;
  oauth2?: OAuth2PluginConfig;
  cors?: CorsPluginConfig;
  request_transformer?: HeaderTransformerConfig;
  response_transformer?: HeaderTransformerConfig;
  body_limit?: BodyLimitPluginConfig;
  retry?: RetryPluginConfig;
  cb?: CbPluginConfig;
  basic_auth?: BasicAuthPluginConfig;
  rate_limit?: RateLimitPluginConfig;
  compression?: CompressionPluginConfig;
  ip_restriction?: IpRestrictionPluginConfig;
  key_auth?: KeyAuthPluginConfig;
  proxy_cache?: ProxyCachePluginConfig;
  grpc_web?: GrpcWebPluginConfig;
  request_termination?: RequestTerminationPluginConfig;
  redirect?: RedirectPluginConfig;
  acl?: AclPluginConfig;
  request_mirror?: RequestMirrorPluginConfig;
  request_validator?: RequestValidatorPluginConfig;
  openid_connect?: OpenidConnectPluginConfig;
  /**
   * The normalised config (defaults filled) of the plugin `name` names, in the member of that
   * name; unknown plugins never reach a snapshot. Field names are those of the admin API.
   */
  config?: 'oauth2' | 'cors' | 'request_transformer' | 'response_transformer' | 'body_limit' | 'retry' | 'cb' | 'basic_auth' | 'rate_limit' | 'compression' | 'ip_restriction' | 'key_auth' | 'proxy_cache' | 'grpc_web' | 'request_termination' | 'redirect' | 'acl' | 'request_mirror' | 'request_validator' | 'openid_connect';
}

export interface RequestValidatorPluginConfig {
  /** The JSON Schema (draft 2020-12) as JSON text: a schema has no shape proto could hold. */
  body_schema: string;
  /** Media ranges as stored (lower-case, "application/*+json" wildcards). */
  allowed_content_types: string[];
  max_body_bytes: number;
  body_required: boolean;
}

/** Stored with defaults filled (plugins/openid-connect.ts); client_secret and cookie_secret travel as the definition holds them. */
export interface OpenidConnectPluginConfig {
  issuer: string;
  allow_http: boolean;
  client_id: string;
  client_secret: string;
  cookie_secret: string;
  redirect_path: string;
  logout_path: string;
  post_logout_redirect: string;
  scopes: string[];
  cookie_name: string;
  /** Go durations, as stored. */
  session_ttl: string;
  timeout: string;
  user_header: string;
  /** ID token claim name → upstream header name; empty = none. */
  claims_to_headers: Record<string, string>;
}

export interface RequestMirrorPluginConfig {
  /** The mirror's origin, normalised ("http://orders-v2:8080"). */
  target: string;
  /** Share of requests copied, 0 to 100. */
  percentage: number;
}

/** message XOR body (with content_type); `optional` keeps an unset one apart from "". */
export interface RequestTerminationPluginConfig {
  status_code: number;
  message?: string;
  body?: string;
  content_type?: string;
  /** Which member of `_message` is set. */
  _message?: 'message';
  /** Which member of `_body` is set. */
  _body?: 'body';
  /** Which member of `_content_type` is set. */
  _content_type?: 'content_type';
}

/** Each part unset takes the request's (`optional`: unset apart from "" and 0). */
export interface RedirectPluginConfig {
  status_code: number;
  /** "http" or "https". */
  scheme?: string;
  host?: string;
  port?: number;
  path?: string;
  /** `path` replaces the matched listen_path only (Gateway API ReplacePrefixMatch). */
  strip_path: boolean;
  /** Which member of `_scheme` is set. */
  _scheme?: 'scheme';
  /** Which member of `_host` is set. */
  _host?: 'host';
  /** Which member of `_port` is set. */
  _port?: 'port';
  /** Which member of `_path` is set. */
  _path?: 'path';
}

export interface AclPluginConfig {
  /** Consumer groups as stored (lower-case, sorted); exactly one of the two lists is non-empty. */
  allow: string[];
  deny: string[];
  /** Send no X-Consumer-Groups upstream. */
  hide_groups_header: boolean;
}

/** No options: a gRPC-Web request is told by its Content-Type. */
export interface GrpcWebPluginConfig {
}

export interface IpRestrictionPluginConfig {
  /** Addresses and CIDR ranges as stored ("10.0.0.0/8", "2001:db8::/32", "192.0.2.7"). */
  allow: string[];
  deny: string[];
  trust_forward_headers: boolean;
}

export interface OAuth2PluginConfig {
  server_name: string;
  /** Scopes the token must all carry; [] = none required. */
  scopes: string[];
  /** Claim (or introspection response member) name → upstream header name; empty = none. */
  claims_to_headers: Record<string, string>;
}

export interface CorsPluginConfig {
  domains: string[];
  methods: string[];
  request_headers: string[];
  exposed_headers: string[];
  options_passthrough: boolean;
  allow_credentials: boolean;
  max_age: number;
}

/** request_transformer and response_transformer (the latter never has querystring). */
export interface HeaderTransformerConfig {
  add: TransformerValues | null;
  append: TransformerValues | null;
  replace: TransformerValues | null;
  remove: TransformerRemovals | null;
}

export interface TransformerValues {
  headers: Record<string, string>;
  querystring: Record<string, string>;
}

export interface TransformerRemovals {
  headers: string[];
  querystring: string[];
}

export interface BodyLimitPluginConfig {
  /** Janus size, as stored ("1M", "512K"). */
  limit: string;
}

export interface RetryPluginConfig {
  attempts: number;
  /** Go duration, as stored ("1s", "100ms", "0s"). */
  backoff: string;
  /** The normalised predicate (a `statuses` list is stored as its predicate). */
  predicate: string;
  methods: string[];
}

/** Janus's hystrix settings; durations in milliseconds as in Janus. */
export interface CbPluginConfig {
  timeout: number;
  max_concurrent_requests: number;
  error_percent_threshold: number;
  request_volume_threshold: number;
  sleep_window: number;
  consecutive_failures: number;
  predicate: string;
}

export interface RateLimitPluginConfig {
  /** Janus rate, as stored ("10-S", "100-M", "1000-H", "5000-D"). */
  limit: string;
  /** "local" or "redis". */
  policy: string;
  trust_forward_headers: boolean;
  /** "ip" or "token". */
  key: string;
}

export interface CompressionPluginConfig {
  /** Bytes; a response with a smaller known Content-Length is not compressed. */
  min_size: number;
  /** Media types as stored ("text/*", "application/json", "application/*+json"). */
  content_types: string[];
  /** "br" and/or "gzip". */
  encodings: string[];
}

export interface BasicAuthPluginConfig {
  /** Shown in the 401's WWW-Authenticate challenge. */
  realm: string;
}

export interface KeyAuthPluginConfig {
  /** Header names (case-insensitive) and query parameter names the key is looked for in, in order. */
  key_names: string[];
  key_in_header: boolean;
  key_in_query: boolean;
  /** Take the key off the request before it goes upstream. */
  hide_credentials: boolean;
  /** Shown in the 401's WWW-Authenticate challenge. */
  realm: string;
}

export interface ProxyCachePluginConfig {
  /** Go duration, as stored ("30s", "5m"): freshness when the response names none. */
  ttl: string;
  /** "GET" and/or "HEAD". */
  methods: string[];
  statuses: number[];
  /** Media ranges as stored ("text/*", "application/json"); absent = any type. */
  content_types: StringList | null;
  /** Lower-cased request header names. */
  vary_headers: string[];
  /** Absent = the whole query; an empty list = none of it; names = only those parameters. */
  vary_query_params: StringList | null;
  cache_control: boolean;
  /** Janus size, as stored ("1MB"). */
  max_entry_size: string;
  /** Responses to requests authenticated by Authorization or a session cookie are stored, per consumer. */
  per_consumer: boolean;
}

/** A list that may be absent as well as empty (a repeated field alone cannot tell them apart). */
export interface StringList {
  values: string[];
}

/** A key_auth credential: only the key's keyed digest ("hmac-sha256$<base64url>", or the earlier "sha256$<base64url>") ever leaves the control plane. */
export interface KeyAuthCredential {
  username: string;
  key_hash: string;
  /** The consumer's groups (lower-case, sorted); empty = none (the definition has no `groups`). */
  groups: string[];
}

/** A basic_auth user: only the scrypt hash ("scrypt$N$r$p$salt$key") ever leaves the control plane. */
export interface BasicAuthCredential {
  username: string;
  password_hash: string;
  /** As KeyAuthCredential's. */
  groups: string[];
}

export interface OAuthServer {
  name: string;
  oauth_endpoints: OAuthEndpoints | null;
  token_strategy: TokenStrategy | null;
}

export interface OAuthEndpoints {
  token: Proxy | null;
  authorize: Proxy | null;
  introspect: Proxy | null;
  revoke: Proxy | null;
}

export interface TokenStrategy {
  /** "jwt", "storage" or "introspection" */
  name: string;
  /** jwt: verification keys; several = rotation. */
  keys: JwtKey[];
  /** Seconds of clock skew tolerated on exp/nbf. */
  leeway: number;
  /** storage: TTL in seconds when the token response has no expires_in (0 = unset). */
  default_ttl: number;
  /** introspection (RFC 7662) settings; absent for the other strategies. */
  introspection: IntrospectionSettings | null;
  /** jwt and introspection: the `iss` the token must carry exactly; "" = not checked. */
  issuer: string;
  /** jwt and introspection: the token's `aud` must contain one of these; [] = not checked. */
  audiences: string[];
  /** jwt: keys fetched by each data plane from a JWKS URI (keys then empty); absent otherwise. */
  jwks: JwksSettings | null;
}

/** Field names and meanings as in the admin API's token_strategy.settings (stored with defaults filled). */
export interface JwksSettings {
  jwks_uri: string;
  algs: string[];
  cache_ttl: string;
  timeout: string;
  cooldown: string;
  max_stale: string;
  allow_http: boolean;
}

/** Field names and meanings as in the admin API's token_strategy.settings; "" = unset. */
export interface IntrospectionSettings {
  use_auth_header: boolean;
  auth_header_type: string;
  token_type_hint: string;
  client_id: string;
  client_secret: string;
  client_auth: string;
  timeout: string;
  cache_ttl: number;
}

export interface JwtKey {
  alg: string;
  key: string;
}
