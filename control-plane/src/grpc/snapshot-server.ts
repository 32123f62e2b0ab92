/**
 * gRPC SnapshotService server. Each data plane holds one StreamSnapshots stream: it says Hello (with
 * the version it holds), receives the current snapshot (or the delta to it from what it holds), then every
 * new version; it answers each push with an ACK or NACK
 * echoing the push's nonce. Only a reply to the last nonce sent on that stream counts
 * (go-control-plane's rule), so a late answer to an older push never overwrites newer state.
 * The server sees snapshots, never the store.
 */
import * as grpc from '@grpc/grpc-js';
import { CHANNEL_OPTIONS } from '#proto/grpc';
import { isGatehouseError } from '#proto/errors';
import type { Logger } from '#proto/logger';
import type * as wire from '#proto/wire';
import type { EncodedSnapshot, SnapshotSource } from '../snapshot/snapshot-builder.js';
import type { DataPlaneAuth, StreamAuthenticator } from './stream-auth.js';

/** One connected data plane, as GET /dataplanes shows it. */
export interface DataPlaneStatus {
  id: string;
  hostname: string;
  /** Peer address of the stream as the CP sees it. */
  address: string;
  proxy_address: string;
  software_version: string;
  /** How the stream authenticated: `mtls` (with the client certificate's subject), `join-token` or `insecure`. */
  auth: DataPlaneAuth;
  /** ISO time the stream said Hello. */
  connected_since: string;
  /** Version/hash the DP last ACKed (or announced in its Hello); null when it holds none. */
  version: number | null;
  hash: string | null;
  last_ack: { version: number; at: string } | null;
  last_nack: { version: number; error: string; at: string } | null;
}

/** Observation hooks (go-control-plane's Callbacks): metrics hang off these. */
export interface StreamCallbacks {
  onConnect?(dp: DataPlaneStatus): void;
  onDisconnect?(dp: DataPlaneStatus): void;
  onPush?(dp: DataPlaneStatus, snapshot: EncodedSnapshot, content: 'snapshot' | 'delta'): void;
  onAck?(dp: DataPlaneStatus): void;
  onNack?(dp: DataPlaneStatus): void;
}

export interface SnapshotServerOptions {
  snapshots: SnapshotSource;
  /** From loadGatehouseProto(): the service whose serializer passes pre-encoded Buffers through. */
  service: grpc.ServiceDefinition;
  wrapPush(nonce: string, snapshotBytes: Buffer, content?: 'snapshot' | 'delta'): Buffer;
  credentials: grpc.ServerCredentials;
  /** Checks each stream as it opens; a refused one ends with UNAUTHENTICATED before anything is sent. Default: every stream is `insecure`. */
  authenticate?: StreamAuthenticator;
  logger: Logger;
  callbacks?: StreamCallbacks;
  now?: () => Date;
}

export interface SnapshotServer {
  /** Binds and starts serving; resolves with the bound port (useful with port 0). */
  listen(host: string, port: number): Promise<number>;
  /** Read-only view of the connected data planes. */
  dataPlanes(): DataPlaneStatus[];
  /** Ends every stream, then drains; forces the shutdown after `timeoutMs`. */
  close(timeoutMs: number): Promise<void>;
}

type Call = grpc.ServerDuplexStream<wire.DataPlaneMessage, Buffer>;

/** A version as a data plane holds it. */
interface Held {
  version: number;
  hash: string;
}

interface Stream {
  call: Call;
  auth: DataPlaneAuth;
  status: DataPlaneStatus | null;
  nonce: number;
  /** What the last push on this stream carried. */
  sent: (Held & { nonce: string; content: 'snapshot' | 'delta' }) | null;
  /** The DP said it applies deltas (Hello.accepts_deltas). */
  deltas: boolean;
  /** A full snapshot was NACKed: the DP holds something else, so the next push is full too. */
  needsFull: boolean;
  /** A NACKed delta's full snapshot could not be sent (transport full): sent on 'drain'. */
  fullOwed: boolean;
  /** The transport is full: skip pushes until 'drain', then send only the newest snapshot. */
  blocked: boolean;
}

/** Data-plane messages are small; only pushes need the large limit. */
const MAX_INBOUND_BYTES = 4 * 1024 * 1024;
const MAX_FIELD_CHARS = 256;
const MAX_ERROR_CHARS = 4096;

const clip = (value: unknown, max: number): string => String(value ?? '').slice(0, max);

const INSECURE: StreamAuthenticator = () => ({ method: 'insecure' });

export function createSnapshotServer(options: SnapshotServerOptions): SnapshotServer {
  const { snapshots, wrapPush, credentials, logger, callbacks = {}, now = () => new Date(), authenticate = INSECURE } = options;
  const server = new grpc.Server({ ...CHANNEL_OPTIONS, 'grpc.max_receive_message_length': MAX_INBOUND_BYTES });
  const streams = new Set<Stream>();

  /**
   * A delta when the DP takes deltas and holds a version the snapshot has a delta from (`deltaFrom`): by
   * default the one last sent on this stream (pushes on a stream arrive in order, so it holds that once it
   * has applied what came before; if it has not, it NACKs and gets the full snapshot), on connect the one
   * its Hello names, after a gap (pushes skipped while the transport was full) the last one sent. A full
   * snapshot when it holds nothing, a version no longer recent, and after a NACK (`base` null).
   */
  function push(stream: Stream, snapshot: EncodedSnapshot, base: Held | null = stream.sent): void {
    if (stream.blocked && base === null) stream.fullOwed = true;
    if (stream.blocked || stream.call.cancelled || !stream.status) return;
    stream.fullOwed = false;
    const nonce = String(++stream.nonce);
    const delta = stream.deltas && !stream.needsFull && base ? snapshot.deltaFrom(base.version, base.hash) : null;
    const content = delta ? 'delta' : 'snapshot';
    stream.sent = { nonce, version: snapshot.version, hash: snapshot.hash, content };
    if (!delta) stream.needsFull = false;
    const flushed = stream.call.write(wrapPush(nonce, delta ? delta.bytes : snapshot.bytes, content));
    callbacks.onPush?.(stream.status, snapshot, content);
    logger.debug({ dataplane: stream.status.id, version: snapshot.version, nonce, content, baseVersion: delta?.baseVersion }, 'snapshot pushed');
    if (!flushed) {
      stream.blocked = true;
      stream.call.once('drain', () => {
        stream.blocked = false;
        const latest = snapshots.current();
        if (latest.hash !== stream.sent?.hash || stream.fullOwed) push(stream, latest, stream.fullOwed ? null : stream.sent);
      });
    }
  }

  function onHello(stream: Stream, hello: wire.Hello): void {
    if (stream.status) return; // one Hello per stream; later ones change nothing
    const address = stream.call.getPeer();
    stream.status = {
      id: clip(hello.id, MAX_FIELD_CHARS) || address,
      hostname: clip(hello.hostname, MAX_FIELD_CHARS),
      address,
      proxy_address: clip(hello.proxy_address, MAX_FIELD_CHARS),
      software_version: clip(hello.software_version, MAX_FIELD_CHARS),
      auth: stream.auth,
      connected_since: now().toISOString(),
      version: hello.version ? Number(hello.version) : null,
      hash: hello.hash ? clip(hello.hash, MAX_FIELD_CHARS) : null,
      last_ack: null,
      last_nack: null,
    };
    logger.info({ dataplane: stream.status.id, address, version: stream.status.version }, 'data plane connected');
    callbacks.onConnect?.(stream.status);
    stream.deltas = hello.accepts_deltas === true;
    // Always push on connect, even when the DP holds the same hash (an empty delta then): its ACK confirms the state.
    push(stream, snapshots.current(), hello.version && hello.hash ? { version: Number(hello.version), hash: stream.status.hash! } : null);
  }

  /** The reply counts only when it echoes the last nonce sent on this stream. */
  function answered(stream: Stream, nonce: string): NonNullable<Stream['sent']> | null {
    if (!stream.status || !stream.sent || stream.sent.nonce !== nonce) {
      logger.debug({ dataplane: stream.status?.id, nonce, expected: stream.sent?.nonce }, 'stale reply ignored');
      return null;
    }
    return stream.sent;
  }

  function onMessage(stream: Stream, message: wire.DataPlaneMessage): void {
    if (message.kind === 'hello' && message.hello) {
      onHello(stream, message.hello);
      return;
    }
    if (message.kind === 'ack' && message.ack) {
      const sent = answered(stream, message.ack.nonce);
      if (!sent || !stream.status) return;
      stream.status.version = sent.version;
      stream.status.hash = sent.hash;
      stream.status.last_ack = { version: sent.version, at: now().toISOString() };
      callbacks.onAck?.(stream.status);
      return;
    }
    if (message.kind === 'nack' && message.nack) {
      const sent = answered(stream, message.nack.nonce);
      if (!sent || !stream.status) return;
      const error = clip(message.nack.error, MAX_ERROR_CHARS);
      stream.status.last_nack = { version: sent.version, error, at: now().toISOString() };
      logger.warn({ dataplane: stream.status.id, version: sent.version, content: sent.content, error }, 'data plane rejected snapshot');
      callbacks.onNack?.(stream.status);
      // A refused delta (the DP did not hold its base, or the result did not hash right): send the
      // whole now. A refused full snapshot is not resent (it would be refused again); the next version goes full.
      if (sent.content === 'delta') push(stream, snapshots.current(), null);
      else stream.needsFull = true;
    }
  }

  function streamSnapshots(call: Call): void {
    const auth = authenticate(call);
    if (isGatehouseError(auth)) {
      logger.warn({ address: call.getPeer(), code: auth.code, reason: auth.message }, 'data plane refused');
      // Ends the call with this status; no listener reads its messages and nothing is pushed.
      call.emit('error', { code: grpc.status.UNAUTHENTICATED, details: auth.message });
      return;
    }
    const stream: Stream = { call, auth, status: null, nonce: 0, sent: null, deltas: false, needsFull: false, fullOwed: false, blocked: false };
    streams.add(stream);
    let closed = false;
    const close = (reason: string) => {
      if (closed) return;
      closed = true;
      streams.delete(stream);
      if (stream.status) {
        logger.info({ dataplane: stream.status.id, reason }, 'data plane disconnected');
        callbacks.onDisconnect?.(stream.status);
      }
    };
    call.on('data', (message: wire.DataPlaneMessage) => onMessage(stream, message));
    call.on('end', () => {
      close('stream ended');
      call.end();
    });
    call.on('error', (err) => close(err.message));
    call.on('cancelled', () => close('cancelled'));
    call.on('close', () => close('closed'));
  }

  server.addService(options.service, { StreamSnapshots: streamSnapshots });
  const unsubscribe = snapshots.subscribe((snapshot) => {
    for (const stream of streams) push(stream, snapshot);
  });

  return {
    listen(host, port) {
      const address = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
      return new Promise((resolve, reject) => {
        server.bindAsync(address, credentials, (err, bound) => (err ? reject(err) : resolve(bound)));
      });
    },

    dataPlanes() {
      return [...streams].flatMap((s) =>
        s.status
          ? [
              {
                ...s.status,
                auth: { ...s.status.auth },
                last_ack: s.status.last_ack && { ...s.status.last_ack },
                last_nack: s.status.last_nack && { ...s.status.last_nack },
              },
            ]
          : [],
      );
    },

    close(timeoutMs) {
      unsubscribe();
      // Streams never end by themselves: end them so the DPs reconnect elsewhere and the drain can finish.
      for (const stream of streams) stream.call.end();
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          logger.warn('gRPC drain timed out; forcing shutdown');
          server.forceShutdown();
          resolve();
        }, timeoutMs);
        timer.unref();
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
  };
}
