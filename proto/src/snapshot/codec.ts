/**
 * Snapshot codec: Definitions <-> the typed protobuf Snapshot message (plain objects in the
 * shape @grpc/proto-loader produces with keepCase), and the content hash over a canonical
 * encoding (so a reordering of the store is not a change).
 *
 * Canonical form = the message body itself: APIs and OAuth servers sorted by name (code-unit
 * order), basic_auth users by username (the member omitted when there are none), every object built below with a fixed key order, absent endpoints omitted; the hash is
 * sha256 hex of its JSON. Wire conventions: "" listen_path = absent, default_ttl 0 = unset,
 * weight 0 = unset (normalised definitions always carry a weight >= 1).
 */
import { createHash } from 'node:crypto';
import { GatehouseError, isGatehouseError } from '../errors.js';
import { parseApiDefinition, parseBasicAuthCredential, parseOAuthServer } from '../definition/index.js';
import { isPlainObject } from '../definition/field-path.js';
import { OAUTH_ENDPOINTS } from '../definition/types.js';
import type {
  ApiDefinition,
  BasicAuthCredential,
  Definitions,
  IntrospectionSettings,
  OAuthEndpointName,
  OAuthServerDefinition,
  ProxyDefinition,
} from '../definition/types.js';

/** Snapshot message as plain object (field names as in gatehouse.proto). */
export interface SnapshotMessage {
  version: number;
  hash: string;
  apis: unknown[];
  oauth_servers: unknown[];
  /** Omitted when there are none (so configurations without users keep their hash), and then absent from the decoded Definitions. */
  basic_auth_credentials?: unknown[];
}

export interface ProxyMessage {
  listen_path: string;
  upstreams: { balancing: string; targets: { target: string; weight: number }[] };
  methods: string[];
  strip_path: boolean;
  append_path: boolean;
  preserve_host: boolean;
  insecure_skip_verify: boolean;
  forwarding_timeouts: { dial_timeout: string; response_header_timeout: string };
}

export interface ApiMessage {
  name: string;
  active: boolean;
  hosts: string[];
  proxy: ProxyMessage;
  /** The config sits in the member named like the plugin (gatehouse.proto `Plugin.config` oneof). */
  plugins: ({ name: string; enabled: boolean } & Record<string, unknown>)[];
}

export interface OAuthServerMessage {
  name: string;
  /** Absent endpoints are omitted when encoding and null after decoding (defaults: true). */
  oauth_endpoints: { token: ProxyMessage } & Partial<Record<Exclude<OAuthEndpointName, 'token'>, ProxyMessage | null>>;
  token_strategy: {
    name: string;
    keys: { alg: string; key: string }[];
    leeway: number;
    default_ttl: number;
    /** Only for the introspection strategy; optional settings are "" when unset. */
    introspection?: IntrospectionMessage;
  };
}

type IntrospectionMessage = { [K in keyof IntrospectionSettings]-?: Exclude<IntrospectionSettings[K], undefined> };

function introspectionToMessage(s: IntrospectionSettings): IntrospectionMessage {
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

function proxyToMessage(p: ProxyDefinition): ProxyMessage {
  return {
    listen_path: p.listen_path ?? '',
    upstreams: {
      balancing: p.upstreams.balancing,
      targets: p.upstreams.targets.map((t) => ({ target: t.target, weight: t.weight ?? 1 })),
    },
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
}

/** JSON value with object keys sorted at every level: a plugin config's canonical form (maps have no order). */
function sortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) out[key] = sortedKeys(value[key]);
  return out;
}

function apiToMessage(api: ApiDefinition): ApiMessage {
  return {
    name: api.name,
    active: api.active,
    hosts: [...api.hosts],
    proxy: proxyToMessage(api.proxy),
    plugins: api.plugins.map((p) => ({ name: p.name, enabled: p.enabled, [p.name]: sortedKeys(p.config) })),
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
      keys: ts.name === 'jwt' ? ts.settings.map((k) => ({ alg: k.alg, key: k.key })) : [],
      leeway: ts.leeway,
      default_ttl: ts.name === 'storage' ? (ts.settings.default_ttl ?? 0) : 0,
      ...(ts.name === 'introspection' ? { introspection: introspectionToMessage(ts.settings) } : {}),
    },
  };
}

const byName = <T extends { name: string }>(a: T, b: T) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

const byUsername = (a: BasicAuthCredential, b: BasicAuthCredential) => byName({ name: a.username }, { name: b.username });

function canonicalBody(defs: Definitions): { apis: ApiMessage[]; oauth_servers: OAuthServerMessage[]; basic_auth_credentials?: BasicAuthCredential[] } {
  const credentials = defs.basicAuthCredentials ?? [];
  return {
    apis: [...defs.apis].sort(byName).map(apiToMessage),
    oauth_servers: [...defs.oauthServers].sort(byName).map(serverToMessage),
    ...(credentials.length > 0
      ? { basic_auth_credentials: [...credentials].sort(byUsername).map((c) => ({ username: c.username, password_hash: c.password_hash })) }
      : {}),
  };
}

function hashBody(body: ReturnType<typeof canonicalBody>): string {
  return createHash('sha256').update(JSON.stringify(body)).digest('hex');
}

/** sha256 hex over the canonical (sorted by name, stable key order) encoding. */
export function definitionsHash(defs: Definitions): string {
  return hashBody(canonicalBody(defs));
}

/** `hash`, when the caller already holds definitionsHash(defs) (the store does), is not computed again. */
export function toSnapshotMessage(version: number, defs: Definitions, hash?: string): SnapshotMessage {
  const body = canonicalBody(defs);
  return { version, hash: hash ?? hashBody(body), ...body };
}

function proxyFromMessage(m: unknown): unknown {
  if (!isPlainObject(m)) return m;
  const upstreams = isPlainObject(m.upstreams) ? m.upstreams : undefined;
  return {
    ...m,
    listen_path: m.listen_path === '' ? undefined : m.listen_path,
    upstreams: upstreams && {
      ...upstreams,
      targets: Array.isArray(upstreams.targets)
        ? upstreams.targets.map((t) => (isPlainObject(t) && t.weight === 0 ? { ...t, weight: undefined } : t))
        : upstreams.targets,
    },
  };
}

function apiFromMessage(m: unknown): unknown {
  if (!isPlainObject(m)) return m;
  return {
    ...m,
    proxy: proxyFromMessage(m.proxy),
    plugins: Array.isArray(m.plugins)
      ? m.plugins.map((p) =>
          isPlainObject(p) && typeof p.name === 'string' ? { name: p.name, enabled: p.enabled, config: Object.hasOwn(p, p.name) ? p[p.name] : undefined } : p,
        )
      : m.plugins,
  };
}

function serverFromMessage(m: unknown): unknown {
  if (!isPlainObject(m)) return m;
  const endpoints = isPlainObject(m.oauth_endpoints) ? m.oauth_endpoints : {};
  const ts = isPlainObject(m.token_strategy) ? m.token_strategy : {};
  const settings =
    ts.name === 'jwt'
      ? ts.keys
      : ts.name === 'introspection'
        ? introspectionFromMessage(ts.introspection)
        : ts.default_ttl
          ? { default_ttl: ts.default_ttl }
          : {};
  return {
    name: m.name,
    oauth_endpoints: Object.fromEntries(OAUTH_ENDPOINTS.map((n) => [n, proxyFromMessage(endpoints[n])])),
    token_strategy: { name: ts.name, settings, leeway: ts.leeway },
  };
}

function decodeAll<T>(
  items: unknown,
  kind: 'apis' | 'oauth_servers' | 'basic_auth_credentials',
  convert: (m: unknown) => unknown,
  parse: (raw: unknown) => T,
  nameOf: (def: T) => string = (def) => (def as { name: string }).name,
): T[] {
  if (!Array.isArray(items)) throw new GatehouseError('VALIDATION_FAILED', `snapshot ${kind} must be an array`);
  const names = new Set<string>();
  return items.map((m, i) => {
    let def: T;
    try {
      def = parse(convert(m));
    } catch (err) {
      const message = isGatehouseError(err) ? err.message : String(err);
      throw new GatehouseError('VALIDATION_FAILED', `snapshot ${kind}[${i}]: ${message}`, { cause: err });
    }
    if (names.has(nameOf(def))) {
      throw new GatehouseError('VALIDATION_FAILED', `snapshot ${kind}[${i}]: duplicate name ${JSON.stringify(nameOf(def))}`);
    }
    names.add(nameOf(def));
    return def;
  });
}

/**
 * Inverse of toSnapshotMessage; throws VALIDATION_FAILED on a message that does not describe valid
 * definitions (each one re-validated) or whose hash does not match its content.
 */
export function fromSnapshotMessage(msg: SnapshotMessage): { version: number; hash: string; defs: Definitions } {
  const defs: Definitions = {
    apis: decodeAll(msg.apis, 'apis', apiFromMessage, parseApiDefinition),
    oauthServers: decodeAll(msg.oauth_servers, 'oauth_servers', serverFromMessage, parseOAuthServer),
  };
  const credentials = msg.basic_auth_credentials ?? [];
  if (!Array.isArray(credentials) || credentials.length > 0) {
    defs.basicAuthCredentials = decodeAll(credentials, 'basic_auth_credentials', (m) => m, parseBasicAuthCredential, (c) => c.username);
  }
  const hash = definitionsHash(defs);
  if (hash !== msg.hash) {
    throw new GatehouseError('VALIDATION_FAILED', `snapshot hash mismatch: message says ${JSON.stringify(msg.hash)}, content is ${hash}`);
  }
  return { version: Number(msg.version), hash, defs };
}
