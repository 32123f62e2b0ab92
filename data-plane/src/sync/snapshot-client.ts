/**
 * The data plane's side of the snapshot stream (docs/operations.md "Control plane ↔ data plane"): one bidirectional StreamSnapshots
 * call; Hello first, then an ACK or NACK for every push, echoing its nonce. When the stream
 * fails or ends, the applied snapshot keeps serving and the client reconnects after a capped,
 * fully jittered exponential backoff (reset by the next push received).
 */
import * as grpc from '@grpc/grpc-js';
import { CHANNEL_OPTIONS, joinTokenMetadata, type GatehouseProto } from '#proto/grpc';
import { createTurns } from '#proto/turns';
import type { Logger } from '#proto/logger';
import { deltaSize, toSnapshotMessage, type DeltaMessage, type SnapshotMessage } from '#proto/snapshot/codec';
import type * as wire from '#proto/wire';
import { backoffDelay, type BackoffOptions } from './backoff.js';
import type { SnapshotCache } from './snapshot-cache.js';
import { LARGE_DELTA, type ApplyResult, type SnapshotHolder } from './snapshot-holder.js';

export interface DataPlaneIdentity {
  id: string;
  hostname: string;
  /** Where this data plane serves proxy traffic, shown by the CP's GET /dataplanes. */
  proxyAddress: string;
  softwareVersion: string;
}

/** A push as the data plane's deserializer gives it (grpc.ts lazyDefinitions: a full snapshot's definitions still bytes). */
type SnapshotPush = Omit<wire.SnapshotPush, 'snapshot' | 'delta'> & { snapshot?: SnapshotMessage | null; delta?: DeltaMessage | null };

type SnapshotCall = grpc.ClientDuplexStream<wire.DataPlaneMessage, SnapshotPush>;

export interface SnapshotClient {
  /** Opens the stream; later failures reconnect on their own until close(). */
  start(): void;
  /** True while a stream is open and has delivered at least one push. */
  readonly connected: boolean;
  /** Why no snapshot has come (yet): the control plane's address and the last attempt's error, no credentials. */
  waiting(): string;
  close(): Promise<void>;
}

/** The last error's message in /readyz: enough to tell DNS from refusal from TLS, not a page of it. */
const MAX_FAILURE_CHARS = 300;

/** A NACK carries the error for GET /dataplanes; keep it readable, not megabytes. */
const MAX_NACK_ERROR_CHARS = 2000;

export function createSnapshotClient(deps: {
  proto: GatehouseProto;
  address: string;
  /** A function is called at every connection attempt (certificate files re-read after renewal). */
  credentials: grpc.ChannelCredentials | (() => grpc.ChannelCredentials);
  /** GRPC_JOIN_TOKEN, sent as call metadata on every stream. */
  joinToken?: string;
  holder: SnapshotHolder;
  identity: DataPlaneIdentity;
  backoff: BackoffOptions;
  logger: Logger;
  cache?: SnapshotCache;
  /**
   * SNAPSHOT_CACHE at cold start: `fallback` is called at most once, while nothing is applied, when
   * the first attempt ends without a push (CP refused or away) or `waitMs` passes without one (a CP
   * behind a black hole refuses nothing). A CP that answers first is never preceded by the cache.
   */
  coldStart?: { waitMs: number; fallback(): void };
  random?: () => number;
}): SnapshotClient {
  const { holder, logger } = deps;
  let closed = false;
  let connected = false;
  let attempt = 0;
  let timer: NodeJS.Timeout | undefined;
  let client: grpc.Client | undefined;
  let call: SnapshotCall | undefined;
  let coldStartTimer: NodeJS.Timeout | undefined;
  let coldStartPending = deps.coldStart !== undefined;
  /** The last attempt's failure, until a push arrives. */
  let failure: string | null = null;

  function endColdStart(fallBack: boolean): void {
    if (!coldStartPending) return;
    coldStartPending = false;
    clearTimeout(coldStartTimer);
    if (fallBack && holder.current() === null) deps.coldStart!.fallback();
  }

  function connect(): void {
    timer = undefined;
    // A fresh channel per attempt with its own subchannel: grpc-js's internal reconnect backoff
    // (shared through the global subchannel pool) would otherwise stretch our delays.
    let credentials: grpc.ChannelCredentials;
    try {
      credentials = typeof deps.credentials === 'function' ? deps.credentials() : deps.credentials;
    } catch (err) {
      // e.g. a certificate file caught mid-renewal: try again after the backoff.
      retryLater('credentials', err as Error);
      return;
    }
    const channel = new deps.proto.Client(deps.address, credentials, {
      ...CHANNEL_OPTIONS,
      'grpc.use_local_subchannel_pool': 1,
    });
    const stream = (channel.StreamSnapshots as (metadata: grpc.Metadata) => SnapshotCall).call(channel, joinTokenMetadata(deps.joinToken));
    client = channel;
    call = stream;
    let down = false;

    const onDown = (reason: string, err?: Error): void => {
      if (down) return;
      down = true;
      connected = false;
      stream.cancel();
      channel.close();
      if (call === stream) call = undefined;
      if (client === channel) client = undefined;
      if (closed) return;
      endColdStart(true);
      retryLater(reason, err);
    };

    // A full snapshot applied in turns (handlePush) lets later pushes arrive meanwhile: each waits for the one before.
    const pushes = createTurns();
    const wanted = () => !down;
    stream.on('data', (push: SnapshotPush) => {
      if (down) return;
      connected = true;
      attempt = 0;
      failure = null;
      endColdStart(false);
      pushes(async () => {
        if (!down) await handlePush(stream, push, wanted);
      }).catch((err: Error) => logger.error({ err }, 'snapshot push failed'));
    });
    stream.on('error', (err: Error) => onDown('error', err));
    stream.on('end', () => onDown('end'));
    stream.on('status', (status: grpc.StatusObject) => onDown(`status ${status.code}`));

    const held = holder.current();
    stream.write({
      hello: {
        id: deps.identity.id,
        hostname: deps.identity.hostname,
        version: held?.version ?? 0,
        hash: held?.hash ?? '',
        proxy_address: deps.identity.proxyAddress,
        software_version: deps.identity.softwareVersion,
        accepts_deltas: true,
      },
    });
    logger.debug({ address: deps.address }, 'snapshot stream opened');
  }

  function retryLater(reason: string, err?: Error): void {
    const delay = backoffDelay(attempt, deps.backoff, deps.random);
    attempt++;
    const held = holder.current();
    const fields = { address: deps.address, reason, err: err?.message, attempt, delayMs: delay, servingVersion: held?.version ?? null };
    const refused = (err as grpc.ServiceError | undefined)?.code === grpc.status.UNAUTHENTICATED;
    const detail = (err?.message ?? reason).slice(0, MAX_FAILURE_CHARS);
    failure = refused ? `control plane ${deps.address} refused authentication (${detail})` : `control plane ${deps.address} unreachable (${detail})`;
    if (refused) {
      // The CP refused this DP: nothing will change by itself, so say so plainly (and keep retrying).
      logger.error(fields, `control plane refused authentication: ${(err as grpc.ServiceError).details}; retrying`);
    } else {
      logger.warn(fields, 'control plane stream down, reconnecting');
    }
    timer = setTimeout(connect, delay);
  }

  /**
   * Applies a push and answers it; a full snapshot or a large delta that arrives while a snapshot serves is applied
   * in turns (holder.applyInTurns, applyDeltaInTurns: the requests in flight keep being served between them) and its
   * promise returned.
   */
  function handlePush(stream: SnapshotCall, push: SnapshotPush, wanted: () => boolean): Promise<void> | null {
    const delta = push?.content === 'delta' ? push.delta : null;
    if (holder.current() !== null && (!delta || deltaSize(delta) >= LARGE_DELTA)) {
      const applying = delta ? holder.applyDeltaInTurns(delta, wanted) : holder.applyInTurns(push?.snapshot as SnapshotMessage, wanted);
      return applying.then((result) => {
        // null: the stream went down meanwhile; the next one's Hello names what is still held.
        if (result && wanted()) answer(stream, push, result, true);
      });
    }
    answer(stream, push, delta ? holder.applyDelta(delta) : holder.apply(push?.snapshot as SnapshotMessage), false);
    return null;
  }

  function answer(stream: SnapshotCall, push: SnapshotPush, result: ApplyResult, inTurns: boolean): void {
    const nonce = push?.nonce ?? '';
    if (!result.ok) {
      logger.error({ version: result.version, err: result.error }, 'snapshot rejected, keeping the previous one');
      stream.write({ nack: { version: result.version, nonce, error: result.error.slice(0, MAX_NACK_ERROR_CHARS) } });
      return;
    }
    stream.write({ ack: { version: result.version, nonce } });
    if (!result.changed) {
      logger.debug({ version: result.version, hash: result.hash }, 'snapshot unchanged');
      return;
    }
    logger.info(
      { version: result.version, hash: result.hash, routes: holder.current()?.routing.size, content: push.content === 'delta' ? 'delta' : 'snapshot', inTurns },
      'snapshot applied',
    );
    // The whole content, also after a delta; built when the cache writes (consecutive pushes coalesce).
    deps.cache
      ?.save(() => {
        const held = holder.content()!;
        // The definitions' hash is memoised (hash.ts); the key and the Gateway certificates, when held, are hashed in again.
        return toSnapshotMessage(held.version, held.defs, undefined, held.keyAuthHashKey, held.gatewayTls);
      })
      .catch((err: Error) => {
        logger.warn({ path: deps.cache?.path, err }, 'could not write the snapshot cache');
      });
  }

  return {
    start() {
      if (closed || call || timer) return;
      if (coldStartPending) coldStartTimer = setTimeout(() => endColdStart(true), deps.coldStart!.waitMs);
      connect();
    },
    get connected() {
      return connected;
    },
    waiting() {
      return failure ?? `waiting for the first snapshot from control plane ${deps.address}`;
    },
    async close() {
      closed = true;
      endColdStart(false);
      if (timer) clearTimeout(timer);
      timer = undefined;
      connected = false;
      if (call) {
        call.end();
        call.cancel();
      }
      client?.close();
      call = undefined;
      client = undefined;
    },
  };
}
