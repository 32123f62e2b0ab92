/**
 * The forward hooks (retry, cb) around the upstream exchange, for routes that have any; a route
 * without them never comes here (forward.ts alone). Hooks run outermost first, the
 * last one's `next()` dispatching one attempt (forwardAttempt). The first attempt goes to the
 * target picked before the hooks run (`ex.target`); each further call of the outermost hook's
 * `next` picks the balancer's next target, so a retry moves on (round-robin, or least_conn and hash
 * leaving out the target it moves from) and a breaker is always asked about the target it guards.
 *
 * The request body streams and is never buffered: every attempt gets its own stream that starts
 * pulling the client's body only when undici reads it. An attempt that failed before that (e.g. a
 * refused connection) leaves the body whole for the next one; once it was read, `ex.bodySent` is
 * set and no further attempt may be made. Except for a gRPC call: its body (usually one message) is kept while
 * it streams, up to KEPT_BYTES, and once it has ended whole (`ex.bodyKept`) a further attempt resends the copy,
 * as gRPC's own retries (gRFC A6) replay the messages they sent. retry.ts makes such an attempt only after a
 * Trailers-Only answer, where the server says with its status alone that it did not process the call.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { CompiledTarget } from '#proto/compile/index';
import { GatehouseError, isGatehouseError } from '#proto/errors';
import type { AttemptStarted, ForwardHook, PluginExchange, UpstreamOutcome } from '../plugins/index.js';
import { isGrpcCall } from '../plugins/grpc-web.js';
import type { Balancer } from '../routing/index.js';
import { forwardAttempt, requestBodyOf, timeUp, type AttemptBody, type ForwardDeps, type ForwardPlan } from './forward.js';

const NO_BODY: AttemptBody = { body: null, started: () => false };

/** A gRPC call's body bytes kept for a resend (gRPC's own per-call retry buffer is 256 KiB; one message is usually far less). */
const KEPT_BYTES = 64 * 1024;

function noop(): void {}

/** The request body the attempts share: the client's stream and, for a gRPC call, its chunks kept so far (null once past KEPT_BYTES or not kept). */
interface SharedBody {
  source: Readable;
  kept: Buffer[] | null;
  keptBytes: number;
}

/** A stream for one attempt over the shared body; reading it starts the client's body on its way (or the kept copy's, once whole). */
function attemptBody(shared: SharedBody | null, ex: PluginExchange): AttemptBody {
  if (!shared) return NO_BODY;
  const { source } = shared;
  const replay = ex.bodyKept ? shared.kept! : null;
  let started = false;
  const body: Readable = new Readable({
    read() {
      if (started) {
        source.resume();
        return;
      }
      started = true;
      if (replay) {
        for (const chunk of replay) body.push(chunk);
        body.push(null);
        return;
      }
      ex.bodySent = true;
      source.on('data', (chunk: Buffer) => {
        if (shared.kept && (shared.keptBytes += chunk.length) <= KEPT_BYTES) shared.kept.push(chunk);
        else shared.kept = null;
        if (!body.push(chunk)) source.pause();
      });
      source.once('end', () => {
        ex.bodyKept = shared.kept !== null;
        body.push(null);
      });
      source.once('error', (err) => body.destroy(err));
      source.resume();
    },
  });
  return { body, started: () => started };
}

/** Runs the hooks, then delivers the outcome they return; rejects with a GatehouseError while nothing was written. */
export async function forwardThroughHooks(
  req: IncomingMessage,
  res: ServerResponse,
  ex: PluginExchange,
  hooks: readonly ForwardHook[],
  balancer: Balancer,
  /** The request's hash key (hash-key.ts), null when none. */
  key: string | null,
  planFor: (target: CompiledTarget) => ForwardPlan,
  deps: ForwardDeps,
): Promise<void> {
  const timedOut = timeUp(res);
  if (timedOut) throw timedOut;
  const firstTarget = (ex.target = balancer.next(key));
  const first = planFor(firstTarget);
  const source = requestBodyOf(req, first);
  const shared: SharedBody | null = source && { source, kept: isGrpcCall(req) ? [] : null, keptBytes: 0 };

  const dispatch = (started: AttemptStarted | undefined): Promise<UpstreamOutcome> => {
    if (res.destroyed) return Promise.resolve({ kind: 'error', error: new GatehouseError('UPSTREAM_UNREACHABLE', 'the client left') });
    let plan: ForwardPlan;
    try {
      plan = ex.target === firstTarget ? first : planFor(ex.target!);
    } catch (err) {
      if (isGatehouseError(err)) return Promise.resolve({ kind: 'error', error: err });
      throw err;
    }
    return forwardAttempt(req, res, plan, deps, attemptBody(shared, ex), started);
  };
  const run = (i: number, started: AttemptStarted | undefined): Promise<UpstreamOutcome> =>
    i === hooks.length ? dispatch(started) : hooks[i]!(ex, (inner) => run(i + 1, inner ?? started));
  let attempts = 0;
  const outcome = await hooks[0]!(ex, (started) => {
    // A call whose deadline passed is not tried again (retry is the outermost hook): the inner ones (cb, passive
    // checks) must not count a target never asked.
    const late = timeUp(res);
    if (late) return Promise.resolve({ kind: 'error', error: late });
    if (attempts++ > 0) ex.target = balancer.next(key, ex.target!);
    return run(1, started);
  });

  if (source && !ex.bodySent) {
    // No attempt read the body (a breaker refused): drain it so the connection can carry the answer.
    source.on('error', noop);
    source.resume();
  }
  if (outcome.kind === 'error') {
    if (res.destroyed) return;
    throw outcome.error;
  }
  outcome.deliver();
}
