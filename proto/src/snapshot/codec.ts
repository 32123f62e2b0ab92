/**
 * Snapshot codec: Definitions <-> the typed protobuf Snapshot message (plain objects as
 * proto/src/grpc.ts converts messages: snake_case, defaults filled), the SnapshotDelta between two
 * versions, and the content hash over a canonical encoding (so a reordering of the store is not a change).
 *
 * Canonical form of one definition = its message built below with a fixed key order (absent
 * endpoints omitted, plugin configs with sorted keys); its hash is sha256 hex of that JSON. The hash
 * of the whole is sha256 hex over one line per kind, `<kind> <count> <sum>\n` in the order apis,
 * oauth_servers, basic_auth_credentials, key_auth_credentials (that one only when there are any, so
 * every configuration without API keys keeps the hash it had before the kind existed, and control
 * and data planes of both releases agree on it during an upgrade), where sum is the sum of that kind's definition hashes as
 * 256-bit numbers modulo 2^256 (64 hex digits): it names the whole content whatever the list order,
 * is the same on every replica, and a change of k definitions updates it in O(k) from the previous
 * one (deriveDefinitions) instead of re-hashing every definition's hash per push.
 * Why a sum is enough: the hash is compared to detect that two sides hold different content (a lost
 * or misapplied delta, a stale cache file), not to resist someone choosing definitions to collide on
 * purpose (anyone who can write definitions controls the content anyway). Names are unique per kind,
 * so the content is a set of distinct sha256 values; two different sets have the same count and sum
 * with probability about 2^-256 for content not chosen to collide (a multiset hash, Bellare and
 * Micciancio's AdHash), and kinds are summed apart.
 * Per-definition messages and hashes are memoised by object identity: definitions are never
 * mutated (the store and the DP build new objects for every change). Wire conventions: "" listen_path =
 * absent, default_ttl 0 = unset, weight 0 = unset (normalised definitions always carry a weight >= 1),
 * an empty match_headers map = absent, hash_on's "" name (source "ip") and false trust_forward_headers (the other
 * sources) = absent.
 */
import { hash as digest } from 'node:crypto';
import { GatehouseError, isGatehouseError } from '../errors.js';
import { parseApiDefinition, parseBasicAuthCredential, parseKeyAuthCredential, parseOAuthServer } from '../definition/index.js';
import { isPlainObject } from '../definition/field-path.js';
import { OAUTH_ENDPOINTS } from '../definition/types.js';
import { LayeredMap } from '../layered-map.js';
import { allTurns } from '../turns.js';
import type * as wire from '../wire.js';
import type {
  ApiDefinition,
  BasicAuthCredential,
  Definitions,
  HashOn,
  IntrospectionSettings,
  JwksSettings,
  KeyAuthCredential,
  OAuthServerDefinition,
  ProxyDefinition,
} from '../definition/types.js';

/**
 * Snapshot message as plain object (wire.ts, generated from gatehouse.proto). The definition lists hold
 * the definitions' messages when encoding, and after a data plane's deserializer (grpc.ts lazyDefinitions)
 * their protobuf bytes, decoded one at a time by `decodeDefinition`.
 */
export interface SnapshotMessage extends Omit<wire.Snapshot, DefinitionList> {
  apis: unknown[];
  oauth_servers: unknown[];
  /** The credential kinds: omitted when there are none (so configurations without them keep their hash), and then absent from the decoded Definitions. */
  basic_auth_credentials?: unknown[];
  key_auth_credentials?: unknown[];
  decodeDefinition?(list: DefinitionList, bytes: Uint8Array): unknown;
}

type DefinitionList = 'apis' | 'oauth_servers' | 'basic_auth_credentials' | 'key_auth_credentials';

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

function apiToMessage(api: ApiDefinition): wire.ApiDefinition {
  return {
    name: api.name,
    active: api.active,
    hosts: [...api.hosts],
    proxy: proxyToMessage(api.proxy),
    // The config in the oneof member named like the plugin (its stored form is that member's message).
    plugins: api.plugins.map((p) => ({ name: p.name, enabled: p.enabled, [p.name]: pluginConfigToMessage(p.name, p.config) }) as wire.Plugin),
  };
}

function serverToMessage(s: OAuthServerDefinition): OAuthServerMessage {
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

const byName = <T extends { name: string }>(a: T, b: T) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

/**
 * Memos of each definition's message and hash (see the file comment: definitions are immutable). The
 * message is kept only once asked for (the CP encodes it); a DP keeps neither (keepDefinitionHashes). Two
 * maps, not one of {message, hash} records: a process that keeps hashes alone would keep a record per
 * definition for each (56 bytes).
 */
const messages = new WeakMap<object, object>();
const hashes = new WeakMap<object, bigint>();

function memoMessage<D extends object, M extends object>(def: D, toMessage: (def: D) => M): M {
  let message = messages.get(def);
  if (message === undefined) messages.set(def, (message = toMessage(def)));
  return message as M;
}

/** The canonical message of one definition (memoised; the same object for the same definition). */
export const apiMessage = (api: ApiDefinition): wire.ApiDefinition => memoMessage(api, apiToMessage);
export const oauthServerMessage = (server: OAuthServerDefinition): OAuthServerMessage => memoMessage(server, serverToMessage);

/**
 * Whether definitionHash keeps each hash it computes (keepDefinitionHashes). A control plane hashes the same
 * definition many times (the diff of a delta compares both sides' hashes, a configuration nobody derived is hashed
 * whole); a data plane hashes each one when it arrives and once more when an edit replaces or removes it, a few µs
 * then, so it keeps none and saves the hash and its WeakMap entry per API.
 */
let keepHashes = true;

/** Set once at start by a process that hashes each definition about twice (the data plane): see keepHashes. */
export function keepDefinitionHashes(keep: boolean): void {
  keepHashes = keep;
}

/** The definition's sha256 as a number (what the whole hash sums; 48 bytes held where its hex took 80). */
function definitionHash<D extends object>(def: D, toMessage: (def: D) => object): bigint {
  let hash = hashes.get(def);
  if (hash !== undefined) return hash;
  // One-shot crypto.hash: about half the time of createHash().update().digest().
  hash = BigInt(`0x${digest('sha256', JSON.stringify(messages.get(def) ?? toMessage(def)), 'hex')}`);
  if (keepHashes) hashes.set(def, hash);
  return hash;
}

/** Every kind's messages sorted by name; an optional kind without definitions is left out. */
function canonicalBody(defs: Definitions): Pick<SnapshotMessage, DefinitionList> {
  const body: Partial<Record<DefinitionList, object[]>> = {};
  for (const key of KIND_KEYS) {
    const codec = KIND_CODECS[key] as KindCodec<object>;
    const list = codec.list(defs);
    if (codec.optional && list.length === 0) continue;
    const named = list.map((def) => ({ name: codec.nameOf(def), def }));
    body[key] = named.sort(byName).map(({ def }) => codec.toMessage(def));
  }
  return body as Pick<SnapshotMessage, DefinitionList>;
}

/** Per kind (KIND_KEYS order): how many definitions and the sum of their hashes; the whole hash names these. */
interface HashSums {
  hash: string;
  counts: number[];
  sums: bigint[];
}

/** Per Definitions object (also never mutated): the store, the history and the snapshot builder hash the same one. */
const wholeHashes = new WeakMap<Definitions, HashSums>();

/** A definition added (`before` absent), replaced, or removed (`after` absent). */
export interface DefinitionEdit {
  kind: ContentChange['kind'];
  before?: object;
  after?: object;
}

/** next → the Definitions it was made from (weakly: a chain of versions must not keep each other alive) and how. */
const derivations = new WeakMap<Definitions, { base: WeakRef<Definitions>; edits: readonly DefinitionEdit[] }>();

/**
 * Records that `next` is `base` with `edits` made and nothing else (the caller built it so, each
 * definition edited at most once): definitionsHash(next) is then derived from base's in O(edits), and
 * toDeltaMessage(base, next) takes the edits instead of comparing the whole lists.
 */
export function deriveDefinitions(base: Definitions, next: Definitions, edits: readonly DefinitionEdit[]): void {
  derivations.set(next, { base: new WeakRef(base), edits });
}

/** The edits that made `next` from `base` (deriveDefinitions), or null when it was not recorded so. */
export function editsFrom(base: Definitions, next: Definitions): readonly DefinitionEdit[] | null {
  const derivation = derivations.get(next);
  return derivation && derivation.base.deref() === base ? derivation.edits : null;
}

function sealed(counts: number[], sums: bigint[]): HashSums {
  const wrapped = sums.map((sum) => BigInt.asUintN(256, sum));
  const lines = KIND_KEYS.flatMap((key, i) => (counts[i] === 0 && (KIND_CODECS[key] as KindCodec<object>).unhashedWhenEmpty ? [] : [`${key} ${counts[i]} ${wrapped[i].toString(16).padStart(64, '0')}\n`]));
  return { hash: digest('sha256', lines.join(''), 'hex'), counts, sums: wrapped };
}

/** Each kind's count and sum of definition hashes, yielding after every `turn` definitions hashed. */
function* sumsOfInTurns(defs: Definitions, turn = Infinity): Generator<void, HashSums> {
  const derivation = derivations.get(defs);
  const base = derivation?.base.deref();
  const from = base && wholeHashes.get(base);
  let done = 0;
  if (from) {
    const counts = [...from.counts];
    const sums = [...from.sums];
    for (const { kind, before, after } of derivation!.edits) {
      const i = KIND_INDEX[kind];
      const codec = KIND_CODECS[KIND_KEYS[i]] as KindCodec<object>;
      if (before) {
        counts[i]--;
        sums[i] -= definitionHash(before, codec.toRawMessage);
      }
      if (after) {
        counts[i]++;
        sums[i] += definitionHash(after, codec.toRawMessage);
      }
      if (++done % turn === 0) yield;
    }
    return sealed(counts, sums);
  }
  const counts: number[] = [];
  const sums: bigint[] = [];
  for (const key of KIND_KEYS) {
    const codec = KIND_CODECS[key] as KindCodec<object>;
    const list = codec.list(defs);
    let sum = 0n;
    for (const def of list) {
      sum += definitionHash(def, codec.toRawMessage);
      if (++done % turn === 0) yield;
    }
    counts.push(list.length);
    sums.push(sum);
  }
  return sealed(counts, sums);
}

/** sha256 hex over each kind's count and sum of definition hashes (see the file comment). */
export function definitionsHash(defs: Definitions): string {
  return allTurns(definitionsHashInTurns(defs));
}

/** definitionsHash, yielding after every `turn` definitions hashed (a serving data plane's large push). */
function* definitionsHashInTurns(defs: Definitions, turn = Infinity): Generator<void, string> {
  let known = wholeHashes.get(defs);
  if (!known) wholeHashes.set(defs, (known = yield* sumsOfInTurns(defs, turn)));
  return known.hash;
}

/** `hash`, when the caller already holds definitionsHash(defs) (the store does), is not computed again. */
export function toSnapshotMessage(version: number, defs: Definitions, hash?: string): SnapshotMessage {
  return { version, hash: hash ?? definitionsHash(defs), ...canonicalBody(defs) };
}

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

function apiFromMessage(m: unknown): unknown {
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

function serverFromMessage(m: unknown): unknown {
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
function* decodeAll<T>(
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

/**
 * Inverse of toSnapshotMessage; throws VALIDATION_FAILED on a message that does not describe valid
 * definitions (each one re-validated) or whose hash does not match its content.
 */
export function fromSnapshotMessage(msg: SnapshotMessage): SnapshotContent {
  return allTurns(fromSnapshotMessageInTurns(msg));
}

/**
 * fromSnapshotMessage in turns of `turn` definitions (each decoded, validated and hashed), yielding between
 * them: a data plane that serves requests while a full snapshot arrives lets them run between turns
 * (snapshot-holder.ts applyInTurns) instead of pausing them all for the whole.
 */
export function* fromSnapshotMessageInTurns(msg: SnapshotMessage, turn = Infinity): Generator<void, SnapshotContent> {
  let defs: Definitions = { apis: [], oauthServers: [] };
  for (const key of KIND_KEYS) {
    const codec = KIND_CODECS[key] as KindCodec<object>;
    const items = codec.optional ? (msg[key] ?? []) : msg[key];
    const list = yield* codec.decode(items, msg.decodeDefinition, turn);
    if (!codec.optional || list.length > 0) defs = codec.withList(defs, list);
  }
  const hash = yield* definitionsHashInTurns(defs, turn);
  if (hash !== msg.hash) {
    throw new GatehouseError('VALIDATION_FAILED', `snapshot hash mismatch: message says ${JSON.stringify(msg.hash)}, content is ${hash}`);
  }
  return { version: Number(msg.version), hash, defs };
}

/** A version's content as both sides hold it. */
export interface SnapshotContent {
  version: number;
  hash: string;
  defs: Definitions;
}

/** What a delta changed, per definition (compile/incremental.ts DefinitionChange): `def` absent = removed. */
export interface ContentChange {
  kind: 'api' | 'oauth-server' | 'basic-auth-credential' | 'key-auth-credential';
  name: string;
  def?: object;
}

/** SnapshotDelta as plain object (wire.ts): `base` → `version`, upserts by kind (as in SnapshotMessage), removals by name. */
export interface DeltaMessage extends Omit<wire.SnapshotDelta, DefinitionList> {
  apis: unknown[];
  oauth_servers: unknown[];
  basic_auth_credentials: unknown[];
  key_auth_credentials: unknown[];
}

interface KindCodec<D extends object> {
  kind: ContentChange['kind'];
  /** Left out of a snapshot, and of the decoded Definitions, when there are none. */
  optional?: boolean;
  /** Its line is left out of the content hash when there are none (a kind added after the hash was defined). */
  unhashedWhenEmpty?: boolean;
  /** The Definitions member holding the list. */
  field: keyof Definitions;
  list(defs: Definitions): readonly D[];
  withList(defs: Definitions, list: D[]): Definitions;
  nameOf(def: D): string;
  /** The memoised message (what goes on the wire). */
  toMessage(def: D): object;
  /** A fresh message (only hashed, not kept). */
  toRawMessage(def: D): object;
  /** Messages → validated definitions, yielding after every `turn` of them; throws with the message's index. */
  decode(items: unknown, decode?: SnapshotMessage['decodeDefinition'], turn?: number): Generator<void, D[]>;
}

/**
 * A global credential kind: `{username, <hash field>, groups?}`, the same on the wire but for `groups`: only
 * when set in the canonical message (credentials without keep their hash), and the wire's `[]` back to absent.
 */
function credentialCodec<D extends { username: string; groups?: string[] }>(
  kind: ContentChange['kind'],
  list: DefinitionList,
  field: 'basicAuthCredentials' | 'keyAuthCredentials',
  secretOf: (c: D) => object,
  parse: (raw: unknown) => D,
): KindCodec<D> {
  const toMessage = (c: D): object => ({ username: c.username, ...secretOf(c), ...(c.groups && { groups: [...c.groups] }) });
  const fromMessage = (m: unknown): unknown => {
    if (!isPlainObject(m) || !Array.isArray(m.groups) || m.groups.length > 0) return m;
    const { groups: _none, ...rest } = m;
    return rest;
  };
  return {
    kind,
    optional: true,
    field,
    list: (defs) => (defs[field] ?? []) as unknown as D[],
    withList: (defs, items) => ({ ...defs, [field]: items }),
    nameOf: (c) => c.username,
    toMessage: (c) => memoMessage(c, toMessage),
    toRawMessage: toMessage,
    decode: (items, decode, turn) => decodeAll(items, list, fromMessage, parse, (c) => c.username, decode, turn),
  };
}

const KIND_CODECS = {
  apis: {
    kind: 'api',
    field: 'apis',
    list: (defs) => defs.apis,
    withList: (defs, apis) => ({ ...defs, apis }),
    nameOf: (api) => api.name,
    toMessage: apiMessage,
    toRawMessage: apiToMessage,
    decode: (items, decode, turn) => decodeAll(items, 'apis', apiFromMessage, parseApiDefinition, undefined, decode, turn),
  } satisfies KindCodec<ApiDefinition>,
  oauth_servers: {
    kind: 'oauth-server',
    field: 'oauthServers',
    list: (defs) => defs.oauthServers,
    withList: (defs, oauthServers) => ({ ...defs, oauthServers }),
    nameOf: (server) => server.name,
    toMessage: oauthServerMessage,
    toRawMessage: serverToMessage,
    decode: (items, decode, turn) => decodeAll(items, 'oauth_servers', serverFromMessage, parseOAuthServer, undefined, decode, turn),
  } satisfies KindCodec<OAuthServerDefinition>,
  basic_auth_credentials: credentialCodec<BasicAuthCredential>(
    'basic-auth-credential',
    'basic_auth_credentials',
    'basicAuthCredentials',
    (c): Pick<wire.BasicAuthCredential, 'password_hash'> => ({ password_hash: c.password_hash }),
    parseBasicAuthCredential,
  ),
  key_auth_credentials: {
    ...credentialCodec<KeyAuthCredential>(
      'key-auth-credential',
      'key_auth_credentials',
      'keyAuthCredentials',
      (c): Pick<wire.KeyAuthCredential, 'key_hash'> => ({ key_hash: c.key_hash }),
      parseKeyAuthCredential,
    ),
    unhashedWhenEmpty: true,
  },
};

type KindKey = keyof typeof KIND_CODECS;
const KIND_KEYS = Object.keys(KIND_CODECS) as KindKey[];
const KIND_INDEX = Object.fromEntries(KIND_KEYS.map((key, i) => [KIND_CODECS[key].kind, i])) as Record<ContentChange['kind'], number>;

/** One kind's changes from `before` to `after`: definitions added or changed (by content), names removed. */
function diffKind<D extends object>(codec: KindCodec<D>, before: Definitions, after: Definitions): { upserts: object[]; removed: string[] } {
  const previous = new Map(codec.list(before).map((d) => [codec.nameOf(d), d]));
  const upserts: object[] = [];
  for (const def of codec.list(after)) {
    const name = codec.nameOf(def);
    const old = previous.get(name);
    previous.delete(name);
    if (old === def) continue;
    if (old === undefined || definitionHash(old, codec.toRawMessage) !== definitionHash(def, codec.toRawMessage)) upserts.push(codec.toMessage(def));
  }
  return { upserts, removed: [...previous.keys()].sort() };
}

/** One kind's changes as deriveDefinitions recorded them (same result as diffKind, in O(edits)). */
function editsOfKind<D extends object>(codec: KindCodec<D>, edits: readonly DefinitionEdit[]): { upserts: object[]; removed: string[] } {
  const upserts: object[] = [];
  const removed: string[] = [];
  for (const { kind, before, after } of edits as readonly { kind: string; before?: D; after?: D }[]) {
    if (kind !== codec.kind) continue;
    if (before && (!after || codec.nameOf(before) !== codec.nameOf(after))) removed.push(codec.nameOf(before));
    if (after && (!before || definitionHash(before, codec.toRawMessage) !== definitionHash(after, codec.toRawMessage))) upserts.push(codec.toMessage(after));
  }
  return { upserts, removed: removed.sort() };
}

/** The delta that turns `base` into `next` (both as the CP's store holds them). */
export function toDeltaMessage(base: SnapshotContent, next: SnapshotContent): DeltaMessage {
  const delta = { base_version: base.version, base_hash: base.hash, version: next.version, hash: next.hash } as DeltaMessage;
  const derivation = derivations.get(next.defs);
  const edits = derivation?.base.deref() === base.defs ? derivation!.edits : null;
  for (const key of KIND_KEYS) {
    const codec = KIND_CODECS[key] as KindCodec<object>;
    // The same lists (a data plane holding the current content under another version): nothing to compare.
    const { upserts, removed } = base.defs === next.defs ? { upserts: [], removed: [] } : edits ? editsOfKind(codec, edits) : diffKind(codec, base.defs, next.defs);
    delta[key] = upserts;
    delta[`removed_${key}`] = removed;
  }
  return delta;
}

/** Number of definitions a delta adds, changes or removes. */
export function deltaSize(delta: DeltaMessage): number {
  return KIND_KEYS.reduce((n, key) => n + (delta[key]?.length ?? 0) + (delta[`removed_${key}`]?.length ?? 0), 0);
}

/**
 * A kind's list as deltas leave it, made without copying it: `base` with `patch` over it (position →
 * definition; positions from base.length on are additions), `length` long, and `positions` (name →
 * position) to find what a delta replaces or removes without a pass over the list. A copy of the list
 * per delta (pointers only) would grow with the configuration and be most of what a data plane's old
 * generation grows by under back-to-back pushes. The array is made when first read (the
 * snapshot cache's save) and kept; the patch is folded into a new base once it outgrows √length, so
 * a delta costs O(√n) amortised.
 */
class ListVersion<D extends object> {
  private array: readonly D[] | undefined;
  constructor(
    readonly base: readonly D[],
    readonly patch: ReadonlyMap<number, D>,
    readonly length: number,
    readonly positions: LayeredMap<string, number>,
  ) {
    if (patch.size === 0 && length === base.length) this.array = base;
  }

  at(i: number): D {
    return this.patch.get(i) ?? this.base[i];
  }

  toArray(): readonly D[] {
    return (this.array ??= Array.from({ length: this.length }, (_, i) => this.at(i)));
  }
}

const NO_PATCH: ReadonlyMap<number, never> = new Map<number, never>();

/** Per list object (never modified, like the lists): its version, built by prepareForDeltas, else on first use. */
const listVersions = new WeakMap<readonly object[], ListVersion<object>>();

/** Per Definitions made by applyDeltaMessage: each kind's version (its lists are made only when read). */
const deltaVersions = new WeakMap<Definitions, Partial<Record<KindKey, ListVersion<object>>>>();

function versionOf<D extends object>(key: KindKey, defs: Definitions): ListVersion<D> {
  const made = deltaVersions.get(defs)?.[key];
  if (made) return made as ListVersion<D>;
  const codec = KIND_CODECS[key] as KindCodec<D>;
  const list = codec.list(defs);
  let version = listVersions.get(list) as ListVersion<D> | undefined;
  if (!version) listVersions.set(list, (version = new ListVersion(list, NO_PATCH, list.length, LayeredMap.of(new Map(list.map((def, i) => [codec.nameOf(def), i]))))));
  return version;
}

/**
 * `from` with the `removed` names taken out and `upserts` put in, and the edits that makes:
 * replacements in place, a removal filled by the last element and additions at the end. Order does
 * not matter to the hash; definitions untouched keep their objects.
 */
function patchList<D extends object>(codec: KindCodec<D>, from: ListVersion<D>, removed: ReadonlySet<string>, upserts: D[], edits: DefinitionEdit[]): ListVersion<D> {
  if (removed.size === 0 && upserts.length === 0) return from;
  const patch = new Map(from.patch);
  const at = (i: number) => patch.get(i) ?? from.base[i];
  let length = from.length;
  const moved = new Map<string, number | undefined>();
  const where = (name: string) => (moved.has(name) ? moved.get(name) : from.positions.get(name));
  for (const after of upserts) {
    const name = codec.nameOf(after);
    const i = where(name);
    if (i === undefined) {
      edits.push({ kind: codec.kind, after });
      moved.set(name, length);
      patch.set(length++, after);
    } else {
      edits.push({ kind: codec.kind, before: at(i), after });
      patch.set(i, after);
    }
  }
  for (const name of removed) {
    const i = where(name);
    if (i === undefined) continue;
    edits.push({ kind: codec.kind, before: at(i) });
    const last = at(--length);
    patch.delete(length);
    if (i < length) {
      patch.set(i, last);
      moved.set(codec.nameOf(last), i);
    }
    moved.set(name, undefined);
  }
  const next = new ListVersion(from.base, patch, length, from.positions.with(moved));
  return patch.size <= Math.max(64, Math.sqrt(length)) ? next : new ListVersion(next.toArray(), NO_PATCH, length, next.positions);
}

/** Definitions whose lists are `versions`' arrays, each made when first read. */
function definitionsOf(versions: Partial<Record<KindKey, ListVersion<object>>>): Definitions {
  const defs = {} as Definitions;
  for (const key of KIND_KEYS) {
    const version = versions[key];
    if (!version) continue;
    const { field } = KIND_CODECS[key];
    Object.defineProperty(defs, field, {
      enumerable: true,
      configurable: true,
      get() {
        const value = version.toArray();
        // From then on a plain member, as an object literal's.
        Object.defineProperty(defs, field, { value, enumerable: true, configurable: true, writable: true });
        return value;
      },
    });
  }
  deltaVersions.set(defs, versions);
  return defs;
}

/**
 * Builds now what the first delta on `defs` would otherwise build on its path: each list's positions
 * (a pass over every list).
 */
export function prepareForDeltas(defs: Definitions): void {
  for (const key of KIND_KEYS) versionOf(key, defs);
}

/**
 * Applies a delta to the content it was taken from. Throws VALIDATION_FAILED when `base` is not the
 * delta's base (version and hash), an upsert does not validate, or the result's hash is not the
 * delta's. Unchanged definitions keep their objects, so everything memoised on them still holds.
 */
export function applyDeltaMessage(base: SnapshotContent, delta: DeltaMessage): SnapshotContent & { changes: ContentChange[] } {
  return allTurns(applyDeltaMessageInTurns(base, delta));
}

/** applyDeltaMessage, yielding after every `turn` definitions decoded or hashed (a serving data plane's large delta). */
export function* applyDeltaMessageInTurns(base: SnapshotContent, delta: DeltaMessage, turn = Infinity): Generator<void, SnapshotContent & { changes: ContentChange[] }> {
  const version = Number(delta.version);
  if (Number(delta.base_version) !== base.version || delta.base_hash !== base.hash) {
    throw new GatehouseError(
      'VALIDATION_FAILED',
      `delta base is version ${Number(delta.base_version)} (${JSON.stringify(delta.base_hash)}), held is version ${base.version} (${JSON.stringify(base.hash)})`,
    );
  }
  const versions: Partial<Record<KindKey, ListVersion<object>>> = {};
  const changes: ContentChange[] = [];
  const edits: DefinitionEdit[] = [];
  for (const key of KIND_KEYS) {
    const codec = KIND_CODECS[key] as KindCodec<object>;
    const removed = delta[`removed_${key}`] ?? [];
    if (!Array.isArray(removed)) throw new GatehouseError('VALIDATION_FAILED', `delta removed_${key} must be an array`);
    const upserts = yield* codec.decode(delta[key] ?? [], undefined, turn);
    const upserted = new Set(upserts.map((d) => codec.nameOf(d)));
    const removedNames = new Set(removed.map(String).filter((name) => !upserted.has(name)));
    for (const name of removedNames) changes.push({ kind: codec.kind, name });
    for (const def of upserts) changes.push({ kind: codec.kind, name: codec.nameOf(def), def });
    const list = patchList(codec, versionOf(key, base.defs), removedNames, upserts, edits);
    if (!codec.optional || list.length > 0) versions[key] = list;
  }
  const defs = definitionsOf(versions);
  deriveDefinitions(base.defs, defs, edits);
  const hash = yield* definitionsHashInTurns(defs, turn);
  if (hash !== delta.hash) {
    throw new GatehouseError('VALIDATION_FAILED', `snapshot hash mismatch after delta ${base.version} → ${version}: message says ${JSON.stringify(delta.hash)}, content is ${hash}`);
  }
  return { version, hash, defs, changes };
}
