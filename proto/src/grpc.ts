/**
 * The gRPC side of the wire contract, shared by both services: the loaded service definition,
 * message-size limits, transport credentials (TLS, mutual TLS, reloaded certificates) and the
 * data-plane join token carried as call metadata.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { certificatePairFromEnv, type CertificateSet, type CertificateWatcher } from './certificate-files.js';
import { envProblem } from './env.js';
import type { Logger } from './logger.js';

/** Path of the .proto file, resolved from both proto/src (tests) and proto/dist (built). */
export const PROTO_PATH = fileURLToPath(new URL('../gatehouse/v1/gatehouse.proto', import.meta.url));

/**
 * 50,000 APIs encode to ~12 MiB, past grpc-js's 4 MiB default, so both sides set the limit
 * explicitly. 256 MiB leaves room for far larger configurations.
 */
export const MAX_MESSAGE_BYTES = 256 * 1024 * 1024;

export const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
  'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
  // Detect a dead peer (CP killed, network partition) without waiting for TCP timeouts.
  'grpc.keepalive_time_ms': 10_000,
  'grpc.keepalive_timeout_ms': 5_000,
  'grpc.keepalive_permit_without_calls': 1,
  'grpc.http2.min_ping_interval_without_data_ms': 5_000,
};

/**
 * How messages convert to and from plain objects, on both sides: uint64 versions as numbers, every
 * field present (defaults, empty lists), and a oneof's member named by a virtual field (`content`).
 * Field names stay snake_case (keepCase at parse), exactly as in the definitions.
 */
const CONVERSION: protobuf.IConversionOptions = {
  longs: Number,
  enums: String,
  defaults: true,
  arrays: true,
  oneofs: true,
};

export interface GatehouseProto {
  /** Service definition whose server-side serializer passes pre-encoded Buffers through. */
  service: grpc.ServiceDefinition;
  /** Client constructor for the SnapshotService. */
  Client: grpc.ServiceClientConstructor;
  /** Encode a Snapshot message once per version (go-control-plane: encode once, send many). */
  encodeSnapshot(snapshot: object): Buffer;
  /** Encode a SnapshotDelta message (codec.ts toDeltaMessage) once per version. */
  encodeDelta(delta: object): Buffer;
  /** SnapshotPush bytes for one stream: the per-stream nonce around already-encoded snapshot (or delta) bytes. */
  wrapPush(nonce: string, snapshotBytes: Buffer, content?: 'snapshot' | 'delta'): Buffer;
}

export interface LoadProtoOptions {
  /** Merged into the options of every client channel (e.g. tlsServerNameOptions()). */
  clientChannelOptions?: grpc.ChannelOptions;
  /**
   * Client: a pushed full snapshot keeps each definition as its protobuf bytes, and the message a
   * `decodeDefinition` that gives one as the full decoder would (codec.ts fromSnapshotMessage decodes
   * them one at a time). See lazySnapshotPush.
   */
  lazyDefinitions?: boolean;
}

export function loadGatehouseProto(options: LoadProtoOptions = {}): GatehouseProto {
  const root = new protobuf.Root().loadSync(PROTO_PATH, { keepCase: true });
  const snapshotService = serviceDefinition(root, 'gatehouse.v1.SnapshotService');
  const extra = options.clientChannelOptions;
  const original = snapshotService.StreamSnapshots;
  const Generated = grpc.makeGenericClientConstructor(
    options.lazyDefinitions
      ? { ...snapshotService, StreamSnapshots: { ...original, responseDeserialize: lazySnapshotPush(root, original.responseDeserialize) } }
      : snapshotService,
    'SnapshotService',
  );
  const Client: grpc.ServiceClientConstructor =
    extra && Object.keys(extra).length > 0
      ? (class extends Generated {
          constructor(address: string, credentials: grpc.ChannelCredentials, channelOptions?: grpc.ChannelOptions) {
            super(address, credentials, { ...channelOptions, ...extra });
          }
        } as grpc.ServiceClientConstructor)
      : Generated;
  const SnapshotType = root.lookupType('gatehouse.v1.Snapshot');
  const service: grpc.ServiceDefinition = {
    ...snapshotService,
    StreamSnapshots: {
      ...original,
      responseSerialize: (value: unknown) => (Buffer.isBuffer(value) ? value : original.responseSerialize(value)),
    },
  };
  const DeltaType = root.lookupType('gatehouse.v1.SnapshotDelta');
  const encodeWithDefinitions = memoisedDefinitionEncoder(root);
  return {
    service,
    Client,
    // Snapshot: apis = 3, oauth_servers = 4, basic_auth_credentials = 5, key_auth_credentials = 6.
    encodeSnapshot: (snapshot) => encodeWithDefinitions(SnapshotType, snapshot, [3, 4, 5, 6]),
    // SnapshotDelta: apis = 5, oauth_servers = 6, basic_auth_credentials = 7, key_auth_credentials = 11.
    encodeDelta: (delta) => encodeWithDefinitions(DeltaType, delta, [5, 6, 7, 11]),
    // SnapshotPush { string nonce = 1; oneof { Snapshot snapshot = 2; SnapshotDelta delta = 3; } }: length-delimited tags 0x0a, 0x12, 0x1a.
    wrapPush: (nonce, bytes, content = 'snapshot') =>
      Buffer.from(
        protobuf.Writer.create()
          .uint32(0x0a)
          .string(nonce)
          .uint32(content === 'delta' ? 0x1a : 0x12)
          .bytes(bytes)
          .finish(),
      ),
  };
}

/**
 * A service of the .proto as grpc-js takes it, every method converting as @grpc/proto-loader's
 * loadSync would (fromObject + encode, decode + toObject with CONVERSION), from the protobufjs root
 * this module parses anyway. proto-loader would parse the file a second time and convert it to
 * descriptor protos for reflection nobody asks for, at every start of either service.
 */
function serviceDefinition(root: protobuf.Root, name: string): grpc.ServiceDefinition {
  const service = root.lookupService(name);
  const serialize =
    (type: protobuf.Type) =>
    (value: unknown): Buffer => {
      const bytes = type.encode(type.fromObject(value as object)).finish();
      return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    };
  const deserialize = (type: protobuf.Type) => (bytes: Buffer) => type.toObject(type.decode(bytes), CONVERSION);
  const methods: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const method of service.methodsArray) {
    const request = service.lookupType(method.requestType);
    const response = service.lookupType(method.responseType);
    methods[method.name] = {
      path: `/${service.fullName.slice(1)}/${method.name}`,
      requestStream: !!method.requestStream,
      responseStream: !!method.responseStream,
      requestSerialize: serialize(request),
      requestDeserialize: deserialize(request),
      responseSerialize: serialize(response),
      responseDeserialize: deserialize(response),
      originalName: method.name.charAt(0).toLowerCase() + method.name.slice(1),
    };
  }
  return methods;
}

/**
 * The data plane's deserializer of SnapshotPush: a full snapshot's definitions stay protobuf bytes
 * (views of the received buffer) until codec.ts fromSnapshotMessage decodes each just before parsing
 * it, so each decoded object is garbage at once. Decoded whole first, the message (plus protobufjs's own
 * objects it is converted from) would outlive the young generation and be promoted, and the old space it
 * filled would stay the data plane's after the sync. Anything else (a delta, an empty push) is decoded whole. Same wire semantics: unknown fields are skipped, a
 * field given twice merges (the last scalar wins, lists append), the last oneof member wins.
 */
function lazySnapshotPush(root: protobuf.Root, decodeWhole: (bytes: Buffer) => unknown): (bytes: Buffer) => unknown {
  const lists = [undefined, undefined, undefined, 'apis', 'oauth_servers', 'basic_auth_credentials', 'key_auth_credentials'] as const;
  const types = {
    apis: root.lookupType('gatehouse.v1.ApiDefinition'),
    oauth_servers: root.lookupType('gatehouse.v1.OAuthServer'),
    basic_auth_credentials: root.lookupType('gatehouse.v1.BasicAuthCredential'),
    key_auth_credentials: root.lookupType('gatehouse.v1.KeyAuthCredential'),
  };
  const decodeDefinition = (list: keyof typeof types, bytes: Uint8Array): unknown => types[list].toObject(types[list].decode(bytes), CONVERSION);
  const GatewayTls = root.lookupType('gatehouse.v1.GatewayTls');
  return (bytes) => {
    const push = protobuf.Reader.create(bytes);
    let nonce = '';
    let member = 0;
    const parts: Uint8Array[] = [];
    while (push.pos < push.len) {
      const tag = push.uint32();
      // SnapshotPush: nonce = 1, snapshot = 2, delta = 3, each length-delimited.
      if (tag === 0x0a) nonce = push.string();
      else if (tag === 0x12) parts.push(push.bytes());
      else push.skipType(tag & 7);
      if (tag === 0x12 || tag === 0x1a) member = tag >>> 3;
    }
    if (member !== 2) return decodeWhole(bytes);
    const snapshot = {
      version: 0,
      hash: '',
      apis: [] as Uint8Array[],
      oauth_servers: [] as Uint8Array[],
      basic_auth_credentials: [] as Uint8Array[],
      key_auth_credentials: [] as Uint8Array[],
      key_auth_hash_key: '',
      gateway_tls: null as unknown,
      decodeDefinition,
    };
    for (const part of parts) {
      const reader = protobuf.Reader.create(part);
      while (reader.pos < reader.len) {
        const tag = reader.uint32();
        const list = lists[tag >>> 3];
        // Snapshot: version = 1 (uint64, varint), hash = 2; the lists 3, 4, 5, 6; key_auth_hash_key = 7; gateway_tls = 8.
        if (tag === 0x08) {
          const version = reader.uint64() as unknown as number | { toNumber(): number };
          snapshot.version = typeof version === 'number' ? version : version.toNumber();
        } else if (tag === 0x12) snapshot.hash = reader.string();
        else if (tag === 0x3a) snapshot.key_auth_hash_key = reader.string();
        // A message given twice merges: its listeners append, as the full decoder's.
        else if (tag === 0x42) snapshot.gateway_tls = mergeListeners(snapshot.gateway_tls, GatewayTls.toObject(GatewayTls.decode(reader.bytes()), CONVERSION));
        else if (list !== undefined && (tag & 7) === 2) snapshot[list].push(reader.bytes());
        else reader.skipType(tag & 7);
      }
    }
    return { nonce, content: 'snapshot', snapshot, delta: null };
  };
}

const mergeListeners = (held: unknown, next: { listeners?: unknown[] }): unknown =>
  held ? { listeners: [...((held as { listeners: unknown[] }).listeners ?? []), ...(next.listeners ?? [])] } : next;

/**
 * Encodes a Snapshot or SnapshotDelta whose definition lists hold codec.ts's memoised messages: each
 * definition message is encoded once (kept per message object) and the repeated fields are written
 * from those bytes, the rest of the message encoded as usual (protobuf concatenation = merge), so a write
 * does not encode everything again: a full snapshot costs a copy.
 */
function memoisedDefinitionEncoder(root: protobuf.Root) {
  const lists = ['apis', 'oauth_servers', 'basic_auth_credentials', 'key_auth_credentials'] as const;
  const typeNames = ['ApiDefinition', 'OAuthServer', 'BasicAuthCredential', 'KeyAuthCredential'];
  const types = typeNames.map((name) => root.lookupType(`gatehouse.v1.${name}`));
  const encoded = new WeakMap<object, Uint8Array>();
  return (type: protobuf.Type, message: object, fieldNumbers: readonly number[]): Buffer => {
    const rest: Record<string, unknown> = { ...message };
    for (const list of lists) delete rest[list];
    const writer = type.encode(type.fromObject(rest));
    lists.forEach((list, i) => {
      for (const item of ((message as Record<string, unknown>)[list] ?? []) as object[]) {
        let bytes = encoded.get(item);
        if (!bytes) encoded.set(item, (bytes = types[i].encode(types[i].fromObject(item)).finish()));
        writer.uint32((fieldNumbers[i] << 3) | 2).bytes(bytes);
      }
    });
    return Buffer.from(writer.finish());
  };
}

/** Control plane: its certificate and key; with a CA, client certificates from that CA are required. */
export interface ServerTlsFiles {
  cert: string;
  key: string;
  ca?: string;
}

/** Data plane: the CA that signed the CP's certificate; with cert + key, its own client certificate (mTLS). */
export interface ClientTlsFiles {
  ca: string;
  cert?: string;
  key?: string;
}

export const GRPC_TLS_NAMES = { cert: 'GRPC_TLS_CERT', key: 'GRPC_TLS_KEY', ca: 'GRPC_TLS_CA' } as const;

const setting = (env: NodeJS.ProcessEnv, name: string): string | undefined => env[name] || undefined;

function certAndKey(env: NodeJS.ProcessEnv): { cert: string; key: string } | null {
  return certificatePairFromEnv(env, GRPC_TLS_NAMES);
}

/** CP: GRPC_TLS_CERT + GRPC_TLS_KEY = TLS; GRPC_TLS_CA as well = client certificates required (mTLS). */
export function serverTlsFromEnv(env: NodeJS.ProcessEnv): ServerTlsFiles | null {
  const pair = certAndKey(env);
  const ca = setting(env, GRPC_TLS_NAMES.ca);
  if (!pair) {
    if (ca) throw envProblem('GRPC_TLS_CA', 'needs GRPC_TLS_CERT and GRPC_TLS_KEY on the control plane');
    return null;
  }
  return ca ? { ...pair, ca } : pair;
}

/** DP: GRPC_TLS_CA = TLS (the CP's certificate verified); GRPC_TLS_CERT + GRPC_TLS_KEY as well = mTLS. */
export function clientTlsFromEnv(env: NodeJS.ProcessEnv): ClientTlsFiles | null {
  const pair = certAndKey(env);
  const ca = setting(env, GRPC_TLS_NAMES.ca);
  if (!ca) {
    if (pair) throw envProblem('GRPC_TLS_CA', 'is required with GRPC_TLS_CERT and GRPC_TLS_KEY (the CA of the control plane certificate)');
    return null;
  }
  return pair ? { ca, ...pair } : { ca };
}

export { isLoopbackHost } from './loopback.js';

/** Host part of a `host:port` / `[v6]:port` address. */
export function hostOfAddress(address: string): string {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(address);
  if (bracketed) return bracketed[1];
  const colon = address.lastIndexOf(':');
  return colon > 0 && address.indexOf(':') === colon ? address.slice(0, colon) : address;
}

/** Metadata key that carries a data plane's join token (GRPC_JOIN_TOKEN), as `Bearer <token>`. */
export const JOIN_TOKEN_METADATA_KEY = 'authorization';

export function joinTokenMetadata(token: string | undefined): grpc.Metadata {
  const metadata = new grpc.Metadata();
  if (token) metadata.set(JOIN_TOKEN_METADATA_KEY, `Bearer ${token}`);
  return metadata;
}

/** The token a call presented, or undefined. */
export function presentedJoinToken(metadata: grpc.Metadata): string | undefined {
  const value = metadata.get(JOIN_TOKEN_METADATA_KEY)[0];
  const match = typeof value === 'string' ? /^Bearer +(\S+)$/i.exec(value.trim()) : null;
  return match?.[1];
}

/**
 * gRPC server credentials. With certificates, grpc-js takes every new set the watcher reloads
 * (new connections get the new certificate); `requireClientCertificate` = mutual TLS.
 */
export function serverCredentials(certificates: CertificateWatcher | null, requireClientCertificate: boolean): grpc.ServerCredentials {
  if (!certificates) return grpc.ServerCredentials.createInsecure();
  const identityListeners = new Set<grpc.experimental.IdentityCertificateUpdateListener>();
  const caListeners = new Set<grpc.experimental.CaCertificateUpdateListener>();
  const publish = (set: CertificateSet): void => {
    for (const listener of identityListeners) listener({ certificate: set.cert, privateKey: set.key });
    for (const listener of caListeners) listener(set.ca ? { caCertificate: set.ca } : null);
  };
  certificates.subscribe(publish);
  // grpc-js registers its own watcher only after adding these listeners: answer on the next tick.
  const provider: grpc.experimental.CertificateProvider = {
    addIdentityCertificateListener(listener) {
      identityListeners.add(listener);
      queueMicrotask(() => {
        const set = certificates.current();
        listener({ certificate: set.cert, privateKey: set.key });
      });
    },
    removeIdentityCertificateListener: (listener) => identityListeners.delete(listener),
    addCaCertificateListener(listener) {
      caListeners.add(listener);
      queueMicrotask(() => {
        const ca = certificates.current().ca;
        listener(ca ? { caCertificate: ca } : null);
      });
    },
    removeCaCertificateListener: (listener) => caListeners.delete(listener),
  };
  // grpc-js passes its first argument on as the identity provider, the second as the (optional) CA provider.
  return grpc.experimental.createCertificateProviderServerCredentials(provider, requireClientCertificate ? provider : null, requireClientCertificate);
}

/**
 * GRPC_TLS_SERVER_NAME (data plane): the name the control plane's certificate is verified against
 * (and sent as SNI and :authority) instead of the host part of the address dialled: for a CP reached
 * through an address its certificate does not name (an IP, a port-forward, another DNS alias).
 */
export function tlsServerNameOptions(serverName: string | undefined): grpc.ChannelOptions {
  if (!serverName) return {};
  return { 'grpc.ssl_target_name_override': serverName, 'grpc.default_authority': serverName };
}

/** Reads the files on every call: a data plane makes credentials per connection attempt, so renewed files are used at the next reconnect. */
export function clientCredentials(tls: ClientTlsFiles | null): grpc.ChannelCredentials {
  if (!tls) return grpc.credentials.createInsecure();
  const ca = readFileSync(tls.ca);
  if (!tls.cert || !tls.key) return grpc.credentials.createSsl(ca);
  return grpc.credentials.createSsl(ca, readFileSync(tls.key), readFileSync(tls.cert));
}

/**
 * grpc-js writes its own diagnostics to stderr (a failed bind prints "No address added…" before
 * the caller gets the error). They go to the service's log at debug level instead: what an
 * operator needs is reported by the service itself, in its own words (e.g. `GRPC_PORT 8082 is already in use`).
 */
export function routeGrpcLogs(logger: Logger): void {
  const log = (...args: unknown[]) => logger.debug({ source: 'grpc-js' }, args.map(String).join(' '));
  grpc.setLogger({ error: log, info: log, debug: log });
}
