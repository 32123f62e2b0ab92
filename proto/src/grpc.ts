/**
 * The gRPC side of the wire contract, shared by both services: the loaded service definition,
 * message-size limits and (optional) mutual-TLS credentials.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import protobuf from 'protobufjs';

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

/** keepCase: field names stay snake_case, exactly as in the definitions; uint64 versions as numbers. */
const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
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
  /** SnapshotPush bytes for one stream: the per-stream nonce around already-encoded snapshot bytes. */
  wrapPush(nonce: string, snapshotBytes: Buffer): Buffer;
}

export interface LoadProtoOptions {
  /** Merged into the options of every client channel (e.g. tlsServerNameOptions()). */
  clientChannelOptions?: grpc.ChannelOptions;
}

export function loadGatehouseProto(options: LoadProtoOptions = {}): GatehouseProto {
  const packageDefinition = protoLoader.loadSync(PROTO_PATH, LOADER_OPTIONS);
  const loaded = grpc.loadPackageDefinition(packageDefinition) as unknown as {
    gatehouse: { v1: { SnapshotService: grpc.ServiceClientConstructor } };
  };
  const extra = options.clientChannelOptions;
  const Generated = loaded.gatehouse.v1.SnapshotService;
  const Client: grpc.ServiceClientConstructor =
    extra && Object.keys(extra).length > 0
      ? (class extends Generated {
          constructor(address: string, credentials: grpc.ChannelCredentials, channelOptions?: grpc.ChannelOptions) {
            super(address, credentials, { ...channelOptions, ...extra });
          }
        } as grpc.ServiceClientConstructor)
      : Generated;
  // keepCase as for the proto-loader side, so snake_case message objects encode field for field.
  const root = new protobuf.Root().loadSync(PROTO_PATH, { keepCase: true });
  const SnapshotType = root.lookupType('gatehouse.v1.Snapshot');
  const original = Client.service.StreamSnapshots;
  const service: grpc.ServiceDefinition = {
    ...Client.service,
    StreamSnapshots: {
      ...original,
      responseSerialize: (value: unknown) =>
        Buffer.isBuffer(value) ? value : original.responseSerialize(value),
    },
  };
  return {
    service,
    Client,
    encodeSnapshot: (snapshot) => Buffer.from(SnapshotType.encode(SnapshotType.fromObject(snapshot)).finish()),
    // SnapshotPush { string nonce = 1; Snapshot snapshot = 2; }: tags 0x0a and 0x12, length-delimited.
    wrapPush: (nonce, snapshotBytes) =>
      Buffer.from(protobuf.Writer.create().uint32(0x0a).string(nonce).uint32(0x12).bytes(snapshotBytes).finish()),
  };
}

export interface TlsFiles {
  cert?: string;
  key?: string;
  ca?: string;
}

/** GRPC_TLS_CERT / GRPC_TLS_KEY / GRPC_TLS_CA: all three set = mutual TLS, none = plaintext. */
export function tlsFilesFromEnv(env: NodeJS.ProcessEnv): TlsFiles | null {
  const files = { cert: env.GRPC_TLS_CERT, key: env.GRPC_TLS_KEY, ca: env.GRPC_TLS_CA };
  const set = Object.values(files).filter(Boolean).length;
  if (set === 0) return null;
  if (set !== 3) throw new Error('GRPC_TLS_CERT, GRPC_TLS_KEY and GRPC_TLS_CA must be set together');
  return files;
}

export function serverCredentials(tls: TlsFiles | null): grpc.ServerCredentials {
  if (!tls) return grpc.ServerCredentials.createInsecure();
  return grpc.ServerCredentials.createSsl(
    readFileSync(tls.ca!),
    [{ cert_chain: readFileSync(tls.cert!), private_key: readFileSync(tls.key!) }],
    true, // require and verify client certificates
  );
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

export function clientCredentials(tls: TlsFiles | null): grpc.ChannelCredentials {
  if (!tls) return grpc.credentials.createInsecure();
  return grpc.credentials.createSsl(readFileSync(tls.ca!), readFileSync(tls.key!), readFileSync(tls.cert!));
}
