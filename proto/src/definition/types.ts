/**
 * Definitions as stored and shown by the admin API: normalised (aliases folded, legacy forms
 * rewritten) with every default filled in. Field names follow the seed (snake_case on the wire).
 */

export type Balancing = 'roundrobin' | 'weight' | 'least_conn' | 'hash';

/** What `balancing: "hash"` hashes: the client's address, or a request header's or cookie's value. */
export type HashOn = { source: 'ip'; trust_forward_headers: boolean } | { source: 'header' | 'cookie'; name: string };

export interface TargetDefinition {
  target: string;
  /** Meaningful with `balancing` "weight", "least_conn" and "hash" (not "roundrobin"); defaults to 1. */
  weight?: number;
  /**
   * With placeholders in the target's host only: a regex (anchored, case-insensitive) the host they form must match,
   * instead of the default of one DNS label per placeholder. An IP literal or `localhost` is refused all the same.
   */
  host_pattern?: string;
}

export interface UpstreamsDefinition {
  balancing: Balancing;
  targets: TargetDefinition[];
  /** Absent when the targets are not health-checked. */
  health_check?: HealthCheckDefinition;
  /** How the targets are spoken to; absent: HTTP/1.1. "http2": h2c for http:// targets, h2 by ALPN for https:// ones (gRPC). */
  protocol?: 'http1' | 'http2';
  /** With `balancing: "hash"` only (and then always). Header names lower-cased. */
  hash_on?: HashOn;
}

export type { HealthCheckDefinition } from './proxy-schema.js';
import type { HealthCheckDefinition } from './proxy-schema.js';

export interface ForwardingTimeouts {
  /** Duration strings, e.g. "5s", "250ms". Defaults 30s / 60s. */
  dial_timeout: string;
  response_header_timeout: string;
}

export interface ProxyDefinition {
  /** Absent when the API routes on hosts and/or methods only. */
  listen_path?: string;
  upstreams: UpstreamsDefinition;
  /** Upper-case HTTP tokens, or ["ALL"] (the default). */
  methods: string[];
  /** Lower-cased header name → accepted values (both sorted); absent when the route has no header condition. */
  match_headers?: Record<string, string[]>;
  strip_path: boolean;
  append_path: boolean;
  preserve_host: boolean;
  insecure_skip_verify: boolean;
  /** Request paths holding `%2F` / `%5C` are forwarded; absent (false): refused with AMBIGUOUS_PATH. */
  allow_encoded_slashes?: boolean;
  forwarding_timeouts: ForwardingTimeouts;
}

/** One of the plugins of proto/src/plugins, its config normalised (defaults filled). */
export type { PluginDefinition, PluginDefinitionOf } from '../plugins/index.js';
import type { PluginDefinition, PluginDefinitionOf } from '../plugins/index.js';

export type OAuth2PluginDefinition = PluginDefinitionOf<'oauth2'>;

export interface ApiDefinition {
  name: string;
  active: boolean;
  hosts: string[];
  proxy: ProxyDefinition;
  plugins: PluginDefinition[];
}

export const JWT_ALGS = ['HS256', 'HS384', 'HS512', 'RS256', 'RS384', 'RS512', 'ES256', 'ES384'] as const;
export type JwtAlg = (typeof JWT_ALGS)[number];

export interface JwtKeySetting {
  alg: JwtAlg;
  /** HS256/384/512: the shared secret; RS and ES algs: a PEM public key (SPKI or certificate). */
  key: string;
}

/** Algs a JWKS key may be used for: public-key ones only (a JWKS carries no shared secrets). */
export const JWKS_ALGS = ['RS256', 'RS384', 'RS512', 'ES256', 'ES384'] as const;
export type JwksAlg = (typeof JWKS_ALGS)[number];

/** A jwt strategy whose keys the data planes fetch from the issuer's JWKS URI (stored with defaults filled). */
export interface JwksSettings {
  /** https (http only for a loopback host, or with allow_http). */
  jwks_uri: string;
  /** Token algs accepted; a JWKS key is used only for these, whatever its own alg or kty. */
  algs: JwksAlg[];
  /** Duration strings: refresh age, one fetch's bound, the least time between two fetches, how long the last good set serves while fetches fail. */
  cache_ttl: string;
  timeout: string;
  cooldown: string;
  max_stale: string;
  /** Plain http to a non-loopback host: only when set (a JWKS over http can be swapped on the path). */
  allow_http: boolean;
}

/** RFC 8725 §3.8-3.9 / RFC 9068 §4: whom the token must come from and be for; each checked only when given. */
export interface TokenAudienceChecks {
  /** The token's `iss` must be exactly this. */
  issuer?: string;
  /** The token's `aud` (a string or an array) must contain one of these. */
  audiences?: string[];
}

export interface JwtTokenStrategy extends TokenAudienceChecks {
  name: 'jwt';
  /** Several entries = key rotation: valid under any one is valid. Legacy {"secret"} is folded in. Or a JWKS source. */
  settings: JwtKeySetting[] | JwksSettings;
  /** Seconds of clock skew tolerated on exp/nbf (default 0). */
  leeway: number;
}

export interface StorageTokenStrategy {
  name: 'storage';
  /** `default_ttl` (seconds) applies when the token response has no `expires_in`. */
  settings: { default_ttl?: number };
  leeway: number;
}

/** RFC 7662 settings of the introspection strategy (stored with defaults filled). */
export interface IntrospectionSettings {
  /** Janus: send the token as `Authorization: <auth_header_type> <token>` instead of the form's `token`. */
  use_auth_header: boolean;
  auth_header_type: string;
  /** RFC 7662 §2.1 `token_type_hint` sent along, e.g. "access_token". */
  token_type_hint?: string;
  /** The gateway's own client credentials at the introspection endpoint (RFC 7662 §2.1). */
  client_id?: string;
  client_secret?: string;
  /** `basic`: HTTP Basic (client_secret_basic); `post`: in the form (client_secret_post). */
  client_auth: 'basic' | 'post';
  /** Duration string bounding one introspection call, e.g. "2s". */
  timeout: string;
  /** Seconds an active result is reused at most (never past the token's exp); 0: every request asks. */
  cache_ttl: number;
}

export interface IntrospectionTokenStrategy extends TokenAudienceChecks {
  name: 'introspection';
  settings: IntrospectionSettings;
  leeway: number;
}

export type TokenStrategy = JwtTokenStrategy | StorageTokenStrategy | IntrospectionTokenStrategy;

export const OAUTH_ENDPOINTS = ['token', 'authorize', 'introspect', 'revoke'] as const;
export type OAuthEndpointName = (typeof OAUTH_ENDPOINTS)[number];

export interface OAuthServerDefinition {
  name: string;
  oauth_endpoints: { token: ProxyDefinition } & Partial<Record<Exclude<OAuthEndpointName, 'token'>, ProxyDefinition>>;
  token_strategy: TokenStrategy;
}

/** A basic_auth user (admin `/credentials/basic_auth`), global like Janus's; never shown with its hash. */
export interface BasicAuthCredential {
  username: string;
  /** `scrypt$N$r$p$salt$key` (proto/src/password-hash.ts). */
  password_hash: string;
  /** The consumer's groups (the acl plugin's): lower-case, deduplicated, sorted; absent = none. */
  groups?: string[];
}

/** A key_auth credential (admin `/credentials/key_auth`), global like basic_auth users; never shown with its hash. */
export interface KeyAuthCredential {
  username: string;
  /** `sha256$<digest, base64url>` of the API key (proto/src/api-key.ts). */
  key_hash: string;
  /** As BasicAuthCredential's. */
  groups?: string[];
}

/** The whole configuration a snapshot carries. */
export interface Definitions {
  apis: ApiDefinition[];
  oauthServers: OAuthServerDefinition[];
  /** Absent = none. */
  basicAuthCredentials?: BasicAuthCredential[];
  /** Absent = none. */
  keyAuthCredentials?: KeyAuthCredential[];
}
