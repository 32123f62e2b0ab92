/**
 * Definitions <-> their protobuf messages (plain objects as proto/src/grpc.ts converts messages: snake_case,
 * defaults filled).
 *
 * Canonical form of one definition = its message built below with a fixed key order (absent
 * endpoints omitted, plugin configs with sorted keys); hash.ts hashes its JSON. Messages are memoised
 * by object identity: definitions are never mutated (the store and the DP build new objects for every
 * change). Wire conventions: "" listen_path = absent, default_ttl 0 = unset, weight 0 = unset (normalised
 * definitions always carry a weight >= 1), an empty match_headers map = absent, hash_on's "" name (source
 * "ip") and false trust_forward_headers (the other sources) = absent.
 */
import { GatehouseError, isGatehouseError } from '../errors.js';
import { isPlainObject } from '../definition/field-path.js';
import { OAUTH_ENDPOINTS } from '../definition/types.js';
import type * as wire from '../wire.js';
import type { ApiDefinition, HashOn, IntrospectionSettings, JwksSettings, OAuthServerDefinition, ProxyDefinition } from '../definition/types.js';

/**
 * Snapshot message as plain object (wire.ts, generated from gatehouse.proto). The definition lists hold
 * the definitions' messages when encoding, and after a data plane's deserializer (grpc.ts lazyDefinitions)
 * their protobuf bytes, decoded one at a time by `decodeDefinition`.
 */
export interface SnapshotMessage extends Omit<wire.Snapshot, DefinitionList | 'key_auth_hash_key' | 'gateway_tls'> {
  /** The key_auth installation key: only with key_auth credentials (codec.ts carriedHashKey). */
  key_auth_hash_key?: string;
  /** Only with Gateway HTTPS listeners (gateway-tls.ts); the wire's null = none. */
  gateway_tls?: wire.GatewayTls | null;
  apis: unknown[];
  oauth_servers: unknown[];
  /** The credential kinds: omitted when there are none (so configurations without them keep their hash), and then absent from the decoded Definitions. */
  basic_auth_credentials?: unknown[];
  key_auth_credentials?: unknown[];
  decodeDefinition?(list: DefinitionList, bytes: Uint8Array): unknown;
}

export type DefinitionList = 'apis' | 'oauth_servers' | 'basic_auth_credentials' | 'key_auth_credentials';

/**
 * A definition's canonical message differs from the wire's decoded form (wire.ts) where a member is
 * left out rather than null: an absent OAuth endpoint, the introspection settings of a strategy that
 * has none, a strategy's unset issuer and audiences, and an upstreams' health check (or its active or
 * passive part) when there is none (cast in upstreamsToMessage). JSON.stringify drops what is absent,
 * so the hash covers only what is there.
 */
export type OAuthServerMessage = Omit<wire.OAuthServer, 'oauth_endpoints' | 'token_strategy'> & {
  oauth_endpoints: Partial<wire.OAuthEndpoints>;
  token_strategy: Omit<wire.TokenStrategy, 'introspection' | 'jwks' | 'issuer' | 'audiences'> & {
    introspection?: wire.IntrospectionSettings;
    jwks?: wire.JwksSettings;
    issuer?: string;
    audiences?: string[];
  };
};

function introspectionToMessage(s: IntrospectionSettings): wire.IntrospectionSettings {
  return {
    use_auth_header: s.use_auth_header,
    auth_header_type: s.auth_header_type,
    token_type_hint: s.token_type_hint ?? '',
    client_id: s.client_id ?? '',
    client_secret: s.client_secret ?? '',
    client_auth: s.client_auth,
    timeout: s.timeout,
    cache_ttl: s.cache_ttl,
  };
}

/** Wire "" back to absent, so the definition re-validates as it was stored. */
function introspectionFromMessage(m: unknown): unknown {
  if (!isPlainObject(m)) return m;
  return Object.fromEntries(Object.entries(m).filter(([, v]) => v !== ''));
}

/** Members listed, not spread: the hash must not follow the order of the object's keys. */
function jwksToMessage(s: JwksSettings): wire.JwksSettings {
  return {
    jwks_uri: s.jwks_uri,
    algs: [...s.algs],
    cache_ttl: s.cache_ttl,
    timeout: s.timeout,
    cooldown: s.cooldown,
    max_stale: s.max_stale,
    allow_http: s.allow_http,
  };
}

/** The members of the source only, as stored. */
function hashOnToMessage(h: HashOn): wire.HashOn {
  const message = h.source === 'ip' ? { source: h.source, trust_forward_headers: h.trust_forward_headers } : { source: h.source, name: h.name };
  return message as Partial<wire.HashOn> as wire.HashOn;
}

/**
 * The upstreams' canonical message has no health_check member at all when there is none, and no protocol or
 * hash_on when the definition gives none (keeps such definitions' hashes).
 */
function upstreamsToMessage(u: ProxyDefinition['upstreams']): wire.Upstreams {
  const message = {
    balancing: u.balancing,
    targets: u.targets.map((t) => ({ target: t.target, weight: t.weight ?? 1, ...(t.host_pattern && { host_pattern: t.host_pattern }) })),
    ...(u.protocol && { protocol: u.protocol }),
    ...(u.hash_on && { hash_on: hashOnToMessage(u.hash_on) }),
  };
  if (!u.health_check) return message as wire.Upstreams;
  const { active: a, passive: p } = u.health_check;
  // Members listed, not spread: the hash must not follow the order (or any extra) of the object's keys.
  // The optional members only when set, so checks without them keep their hash.
  const active = a && {
    ...(a.path !== undefined && { path: a.path }),
    interval: a.interval,
    timeout: a.timeout,
    healthy_threshold: a.healthy_threshold,
    unhealthy_threshold: a.unhealthy_threshold,
    ...(a.method && { method: a.method }),
    ...(a.statuses && { statuses: [...a.statuses] }),
    ...(a.headers && { headers: Object.fromEntries(Object.entries(a.headers).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))) }),
    ...(a.grpc && { grpc: { service: a.grpc.service } }),
  };
  const passive = p && { unhealthy_threshold: p.unhealthy_threshold, ejection: p.ejection, ...(p.statuses && { statuses: [...p.statuses] }) };
  return { ...message, health_check: { ...(active && { active }), ...(passive && { passive }) } as wire.HealthCheck } as wire.Upstreams;
}

function proxyToMessage(p: ProxyDefinition): wire.Proxy {
  const message = {
    listen_path: p.listen_path ?? '',
    upstreams: upstreamsToMessage(p.upstreams),
    methods: [...p.methods],
    strip_path: p.strip_path,
    append_path: p.append_path,
    preserve_host: p.preserve_host,
    insecure_skip_verify: p.insecure_skip_verify,
    forwarding_timeouts: {
      dial_timeout: p.forwarding_timeouts.dial_timeout,
      response_header_timeout: p.forwarding_timeouts.response_header_timeout,
    },
  };
  // Only when set, last, names sorted: a proxy without header conditions keeps the message (and hash) it had before them.
  // allow_encoded_slashes likewise, only when true.
  const slashes = p.allow_encoded_slashes ? { allow_encoded_slashes: true } : null;
  if (!p.match_headers) return (slashes ? { ...message, ...slashes } : message) as wire.Proxy;
  const names = Object.keys(p.match_headers).sort();
  return { ...message, match_headers: Object.fromEntries(names.map((name) => [name, { values: [...p.match_headers![name]] }])), ...slashes } as wire.Proxy;
}

/** JSON value with object keys sorted at every level: a plugin config's canonical form (maps have no order). */
function sortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) out[key] = sortedKeys(value[key]);
  return out;
}

/**
 * Config members that may be null (absent) as well as an empty list travel in a StringList message
 * (`{values}`; proto3 cannot tell an absent repeated field from an empty one), by plugin.
 */
const NULLABLE_LISTS: Readonly<Record<string, readonly string[]>> = { proxy_cache: ['content_types', 'vary_query_params'] };

/** Config members of any JSON shape (request_validator's JSON Schema), which travel as their JSON text, by plugin. */
const JSON_MEMBERS: Readonly<Record<string, readonly string[]>> = { request_validator: ['body_schema'] };

function pluginConfigToMessage(name: string, config: unknown): unknown {
  const lists = NULLABLE_LISTS[name];
  const texts = JSON_MEMBERS[name];
  if ((!lists && !texts) || !isPlainObject(config)) return sortedKeys(config);
  const out: Record<string, unknown> = { ...config };
  for (const key of lists ?? []) out[key] = out[key] == null ? null : { values: out[key] };
  // As written: the schema's key order is the order ajv checks (and so reports) its keywords in.
  for (const key of texts ?? []) out[key] = JSON.stringify(out[key]);
  return sortedKeys(out);
}

function pluginConfigFromMessage(name: string, message: unknown): unknown {
  const lists = NULLABLE_LISTS[name];
  const texts = JSON_MEMBERS[name];
  if ((!lists && !texts) || !isPlainObject(message)) return message;
  const out: Record<string, unknown> = { ...message };
  for (const key of lists ?? []) {
    const wrapped = out[key];
    out[key] = isPlainObject(wrapped) ? wrapped.values : (wrapped ?? null);
  }
  // Text that is not JSON is left as it is, for the definition's parse to refuse by name.
  for (const key of texts ?? []) {
    try {
      if (typeof out[key] === 'string') out[key] = JSON.parse(out[key]);
    } catch {
      // left as the string
    }
  }
  return out;
}

export function apiToMessage(api: ApiDefinition): wire.ApiDefinition {
  return {
    name: api.name,
    active: api.active,
    hosts: [...api.hosts],
    proxy: proxyToMessage(api.proxy),
    // The config in the oneof member named like the plugin (its stored form is that member's message).
    plugins: api.plugins.map((p) => ({ name: p.name, enabled: p.enabled, [p.name]: pluginConfigToMessage(p.name, p.config) }) as wire.Plugin),
  };
}

export function serverToMessage(s: OAuthServerDefinition): OAuthServerMessage {
  const endpoints: OAuthServerMessage['oauth_endpoints'] = { token: proxyToMessage(s.oauth_endpoints.token) };
  for (const name of OAUTH_ENDPOINTS) {
    const p = s.oauth_endpoints[name];
    if (name !== 'token' && p) endpoints[name] = proxyToMessage(p);
  }
  const ts = s.token_strategy;
  return {
    name: s.name,
    oauth_endpoints: endpoints,
    token_strategy: {
      name: ts.name,
      keys: ts.name === 'jwt' && Array.isArray(ts.settings) ? ts.settings.map((k) => ({ alg: k.alg, key: k.key })) : [],
      leeway: ts.leeway,
      default_ttl: ts.name === 'storage' ? (ts.settings.default_ttl ?? 0) : 0,
      ...(ts.name === 'introspection' ? { introspection: introspectionToMessage(ts.settings) } : {}),
      ...(ts.name === 'jwt' && !Array.isArray(ts.settings) ? { jwks: jwksToMessage(ts.settings) } : {}),
      // Only when set, so servers without them keep their hash.
      ...(ts.name !== 'storage' && ts.issuer !== undefined && { issuer: ts.issuer }),
      ...(ts.name !== 'storage' && ts.audiences !== undefined && { audiences: [...ts.audiences] }),
    },
  };
}

/**
 * Memo of each definition's message (see the file comment: definitions are immutable), kept only once asked
 * for (the CP encodes it); hashes have their own (hash.ts): a process that keeps hashes alone would otherwise
 * keep a {message, hash} record per definition (56 bytes).
 */
const messages = new WeakMap<object, object>();

export function memoMessage<D extends object, M extends object>(def: D, toMessage: (def: D) => M): M {
  let message = messages.get(def);
  if (message === undefined) messages.set(def, (message = toMessage(def)));
  return message as M;
}

/** The canonical message of one definition (memoised; the same object for the same definition). */
export const apiMessage = (api: ApiDefinition): wire.ApiDefinition => memoMessage(api, apiToMessage);
export const oauthServerMessage = (server: OAuthServerDefinition): OAuthServerMessage => memoMessage(server, serverToMessage);

/** The memoised message of `def`, if one was made. */
export const memoisedMessage = (def: object): object | undefined => messages.get(def);

// proxyFromMessage and apiFromMessage return `m` itself when no wire convention applies to it (the
// common case, so a data plane's full snapshot copies nothing here); the schemas that parse the result build
// their own objects.
// A target's wire host_pattern "" is left to the schema, which stores it as absent: converting it here would copy every target.
const weightUnset = (t: unknown): boolean => isPlainObject(t) && t.weight === 0;

/** A member the wire gives its default ("", [], {}) back to absent. */
const unsetMember = (v: unknown) => v === '' || (Array.isArray(v) && v.length === 0) || (isPlainObject(v) && Object.keys(v).length === 0);

/** A health check part's optional members (`names`) the wire gives as defaults, back to absent; the part itself when none is. */
function healthPartFromMessage(part: unknown, names: readonly string[]): unknown {
  if (!isPlainObject(part) || !names.some((n) => Object.hasOwn(part, n) && unsetMember(part[n]))) return part;
  return Object.fromEntries(Object.entries(part).filter(([n, v]) => !(names.includes(n) && unsetMember(v))));
}

function healthCheckFromMessage(h: unknown): unknown {
  if (!isPlainObject(h)) return h;
  let active = healthPartFromMessage(h.active, ['path', 'method', 'statuses', 'headers']);
  // A message member decodes as null when unset; set with the default service it may decode as {}, which is set.
  if (isPlainObject(active) && active.grpc === null) active = Object.fromEntries(Object.entries(active).filter(([n]) => n !== 'grpc'));
  const passive = healthPartFromMessage(h.passive, ['statuses']);
  return active === h.active && passive === h.passive ? h : { ...h, active, passive };
}

/**
 * Wire {name: {values}} → {name: values}. The wire's empty map is left as it is: the schema stores an empty
 * match_headers as absent, and replacing it here would copy every proxy of a full snapshot.
 */
function matchHeadersFromMessage(h: unknown): unknown {
  if (!isPlainObject(h)) return h;
  let wrapped = false;
  for (const name in h) wrapped ||= isPlainObject(h[name]);
  return wrapped ? Object.fromEntries(Object.entries(h).map(([name, list]) => [name, isPlainObject(list) ? list.values : list])) : h;
}

/** Wire HashOn → the stored form: no name ("") with source "ip", no trust_forward_headers (false) with the others. */
function hashOnFromMessage(h: unknown): unknown {
  if (!isPlainObject(h)) return h;
  return h.source === 'ip' ? { source: h.source, trust_forward_headers: h.trust_forward_headers } : { source: h.source, name: h.name };
}

function proxyFromMessage(m: unknown): unknown {
  if (!isPlainObject(m)) return m;
  const matchHeaders = matchHeadersFromMessage(m.match_headers);
  let upstreams = isPlainObject(m.upstreams) ? m.upstreams : undefined;
  const targets = upstreams && Array.isArray(upstreams.targets) ? upstreams.targets : undefined;
  const weightsUnset = targets?.some(weightUnset) ?? false;
  const healthCheck = upstreams && healthCheckFromMessage(upstreams.health_check);
  if (upstreams && healthCheck !== upstreams.health_check) upstreams = { ...upstreams, health_check: healthCheck };
  if (upstreams?.protocol === '') upstreams = { ...upstreams, protocol: undefined };
  if (upstreams?.hash_on != null) upstreams = { ...upstreams, hash_on: hashOnFromMessage(upstreams.hash_on) };
  if (m.listen_path !== '' && !weightsUnset && upstreams === m.upstreams && matchHeaders === m.match_headers) return m;
  return {
    ...m,
    listen_path: m.listen_path === '' ? undefined : m.listen_path,
    match_headers: matchHeaders,
    upstreams: weightsUnset ? { ...upstreams, targets: targets!.map((t) => (weightUnset(t) ? { ...(t as object), weight: undefined } : t)) } : upstreams,
  };
}

export function apiFromMessage(m: unknown): unknown {
  if (!isPlainObject(m)) return m;
  const proxy = proxyFromMessage(m.proxy);
  const plugins =
    Array.isArray(m.plugins) && m.plugins.length > 0
      ? m.plugins.map((p) =>
          isPlainObject(p) && typeof p.name === 'string'
            ? { name: p.name, enabled: p.enabled, config: Object.hasOwn(p, p.name) ? pluginConfigFromMessage(p.name, p[p.name]) : undefined }
            : p,
        )
      : m.plugins;
  return proxy === m.proxy && plugins === m.plugins ? m : { ...m, proxy, plugins };
}

export function serverFromMessage(m: unknown): unknown {
  if (!isPlainObject(m)) return m;
  const endpoints = isPlainObject(m.oauth_endpoints) ? m.oauth_endpoints : {};
  const ts = isPlainObject(m.token_strategy) ? m.token_strategy : {};
  const settings =
    ts.name === 'jwt'
      ? (ts.jwks ?? ts.keys)
      : ts.name === 'introspection'
        ? introspectionFromMessage(ts.introspection)
        : ts.default_ttl
          ? { default_ttl: ts.default_ttl }
          : {};
  return {
    name: m.name,
    oauth_endpoints: Object.fromEntries(OAUTH_ENDPOINTS.map((n) => [n, proxyFromMessage(endpoints[n])])),
    // "" and [] (the wire's unset) are absent; the schema stores [] as absent.
    token_strategy: { name: ts.name, settings, leeway: ts.leeway, issuer: ts.issuer || undefined, audiences: ts.audiences },
  };
}

/** Decodes and validates each item, yielding after every `turn` of them. */
export function* decodeAll<T>(
  items: unknown,
  kind: DefinitionList,
  convert: (m: unknown) => unknown,
  parse: (raw: unknown) => T,
  nameOf: (def: T) => string = (def) => (def as { name: string }).name,
  decode?: SnapshotMessage['decodeDefinition'],
  turn = Infinity,
): Generator<void, T[]> {
  if (!Array.isArray(items)) throw new GatehouseError('VALIDATION_FAILED', `snapshot ${kind} must be an array`);
  const names = new Set<string>();
  const defs: T[] = [];
  for (let i = 0; i < items.length; i++) {
    const m: unknown = items[i];
    let def: T;
    try {
      def = parse(convert(decode && m instanceof Uint8Array ? decode(kind, m) : m));
    } catch (err) {
      const message = isGatehouseError(err) ? err.message : String(err);
      throw new GatehouseError('VALIDATION_FAILED', `snapshot ${kind}[${i}]: ${message}`, { cause: err });
    }
    if (names.has(nameOf(def))) {
      throw new GatehouseError('VALIDATION_FAILED', `snapshot ${kind}[${i}]: duplicate name ${JSON.stringify(nameOf(def))}`);
    }
    names.add(nameOf(def));
    defs.push(def);
    if ((i + 1) % turn === 0) yield;
  }
  return defs;
}
