/**
 * One upstream exchange: the client's request streamed to the upstream, the upstream's response
 * streamed back. Driven through undici's dispatch handler rather than `request()`: body chunks go
 * from undici's parser straight to the client's socket (pausing undici while the client is
 * behind), without a Readable per response, a stream.pipeline per response and an AbortController
 * per request, which would be most of the proxy's CPU time per request (stream.pipeline alone aborts an
 * internal AbortController per call, and every abort builds a DOMException with a stack trace). Semantics
 * are those of undici's request(): the proxy-server tests pin them. Routes with forward hooks (retry, cb) use forwardAttempt
 * (forward-hooks.ts): the same exchange, its response parked at its start until a hook delivers it.
 */
import { IncomingMessage, ServerResponse, type OutgoingHttpHeaders } from 'node:http';
import { Http2ServerRequest } from 'node:http2';
import { performance } from 'node:perf_hooks';
import { pipeline, Transform, type Readable, type Writable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { errors } from './undici.js';
import { GatehouseError } from '#proto/errors';
import type { Logger } from '#proto/logger';
import { observedResponse, type EndpointObserver } from '../auth/index.js';
import type { AttemptStarted, PluginExchange, UpstreamOutcome } from '../plugins/index.js';
import type { TargetLoad } from '../routing/index.js';
import { isHttp2, requestHasBody } from '../plugins/request-framing.js';
import type { AccessRecord, ByteCounter } from './access-log.js';
import { clientResponseHeaders, takeGrpcStatus, takesTrailers, trailerFields } from './headers.js';
import type { ProxyMetrics } from './proxy-metrics.js';
import { formatGrpcTimeout, MAX_TIMER_MS } from './deadline.js';
import { upstreamError } from './upstream-error.js';
import { UPSTREAM_IDLE_TIMEOUT_MS } from './upstream-pools.js';

export interface ForwardPlan {
  requestId: string;
  routeId: string;
  pool: Dispatcher;
  /** Path plus query for the upstream. */
  path: string;
  /** undici's flat [name, value, ...] list. */
  headers: string[];
  headersTimeoutMs: number;
  observer: EndpointObserver | null;
  /** The route's plugin pipeline walk (body wrappers, response hooks); null for routes without plugins. */
  plugins: PluginExchange | null;
  /** least_conn's count of the target's attempts in flight; null for other balancings. */
  load: TargetLoad | null;
}

/**
 * The proxy listener's responses (createServer's ServerResponse option): the listener's one 'close'
 * listener runs `onClientClose` for the plain exchange, which so needs no listener of its own.
 * A second `once('close')` per request would cost nearly as much again (each once() binds a wrapper and the
 * second turns the slot into an array).
 */
export class ProxyResponse extends ServerResponse {
  onClientClose: (() => void) | null = null;
  /** The proxy listener's access record of this request (dispatch.ts), null when the log is off. */
  access: AccessRecord | null = null;
  /** What counts the answer's bytes for the access log: the client's connection (`socket` is detached by 'close'). */
  sent: ByteCounter | null = null;
  /** A gRPC call's deadline (performance.now() ms) from its grpc-timeout (dispatch.ts), null when it has none. */
  deadline: number | null = null;
}

export interface ForwardDeps {
  logger: Logger;
  metrics?: ProxyMetrics;
  /** True once the listener is closing: responses then carry `Connection: close`. */
  draining(): boolean;
}

/** Passes chunks through unchanged while showing them to `see`; an observer failure never alters the stream. */
function tap(see: (chunk: Buffer) => void): Transform {
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      try {
        see(chunk);
      } catch {
        // The observer keeps a bounded copy for token bookkeeping only; the client's bytes win.
      }
      callback(null, chunk);
    },
  });
}

/**
 * The route's response_header_timeout runs on a native timer of the exchange, armed once the
 * request body has been handed over (at dispatch when there is none), so upload time never
 * counts; connect time of a new connection does. Not undici's per-request headersTimeout, for two
 * reasons: undici runs it on a coarse timer (about 1 s resolution, so "250ms" fires after about a
 * second), and a per-request value that differs from the body timeout makes undici's parser replace
 * its timer (an object and a WeakRef, kept about a second by undici's timer wheel) twice per request
 * instead of refreshing one, which promotes garbage to the old generation. The pools keep undici's
 * header and body timeouts equal (upstream-pools.ts).
 *
 * A class, not an object literal with a `get fired()` closing over the exchange: with one such literal
 * per request the data plane promotes the whole exchange to the old generation, as if every exchange
 * outlived two scavenges (V8 builds a literal's getter at run time). No per-request object literal on
 * the proxy path has a getter.
 *
 * A gRPC call's deadline (its grpc-timeout, dispatch.ts) runs on the same timer: from dispatch, whatever the
 * upload, the timer fires at the sooner of the deadline and the header wait, and once the headers came it stays
 * armed for the deadline alone, which bounds the whole call.
 */
class HeaderWait {
  fired = false;
  /** What fired (or will): the call's deadline rather than the route's header wait. */
  byDeadline = false;
  private settled = false;
  private timer: NodeJS.Timeout | undefined = undefined;
  /** Bound only when the timer must wait for the request body's end. */
  private armOnEnd: (() => void) | null = null;

  constructor(
    private readonly req: IncomingMessage,
    hasRequestBody: boolean,
    private readonly timeoutMs: number,
    /** performance.now() of the gRPC call's deadline, null when it has none. */
    private readonly deadline: number | null,
    private readonly onTimeout: () => void,
  ) {
    if (hasRequestBody && !req.readableEnded) {
      req.once('end', (this.armOnEnd = () => this.arm()));
      if (deadline !== null) this.set(Infinity);
    } else this.arm();
  }

  private arm(): void {
    if (!this.settled) this.set(this.timeoutMs);
  }

  /** (Re)arms the timer for `waitMs` or the deadline, whichever comes first. */
  private set(waitMs: number): void {
    clearTimeout(this.timer);
    const leftMs = this.deadline === null ? Infinity : this.deadline - performance.now();
    this.byDeadline = leftMs <= waitMs;
    this.timer = setTimeout(fire, Math.min(waitMs, leftMs, MAX_TIMER_MS), this);
  }

  /** The response headers came: the header wait is over; the deadline, if any, still runs. */
  responded(): void {
    this.clear();
    if (this.deadline !== null) this.set(Infinity);
  }

  clear(): void {
    this.settled = true;
    clearTimeout(this.timer);
    if (this.armOnEnd) {
      this.req.off('end', this.armOnEnd);
      this.armOnEnd = null;
    }
  }

  static fire(wait: HeaderWait): void {
    wait.fired = true;
    wait.onTimeout();
  }
}

const fire = HeaderWait.fire;

function noop(): void {}

/** The upstream's headers with the call's grpc-timeout replaced by the time left (as Envoy does): the time spent in the gateway, and by earlier tries, is gone. */
function withGrpcTimeout(headers: string[], leftMs: number): string[] {
  const out = headers.slice();
  for (let i = 0; i < out.length; i += 2) if (out[i]!.toLowerCase() === 'grpc-timeout') out[i + 1] = formatGrpcTimeout(leftMs);
  return out;
}

/** An attempt's end for least_conn's count (once: the caller keeps the null it returns). */
function unload(load: TargetLoad | null): null {
  if (load) load.inFlight--;
  return null;
}

/**
 * A gRPC call's final status (grpc-status of the upstream's trailers or Trailers-Only head, or of the gateway's
 * refusal) for the access log and the metrics; nothing for a request that is no gRPC call (no status).
 */
export function recordGrpcStatus(res: ServerResponse, metrics: ProxyMetrics | undefined, routeId: string, value: string | string[] | number | undefined): void {
  if (value === undefined) return;
  const status = Number(value);
  const access = (res as ProxyResponse).access;
  if (access) access.grpcStatus = status;
  metrics?.grpc(routeId, status);
}

/** UPSTREAM_TIMEOUT when the gRPC call's deadline has passed before an attempt (a slow authentication, a retry's backoff): nothing goes upstream then. */
export function timeUp(res: ServerResponse): GatehouseError | null {
  const deadline = (res as ProxyResponse).deadline ?? null;
  return deadline !== null && deadline <= performance.now()
    ? new GatehouseError('UPSTREAM_TIMEOUT', "the gRPC call's grpc-timeout passed before it went upstream")
    : null;
}

/** Body bytes a parked attempt's response may hold before undici is paused (see Exchange.park). */
const PARKED_BYTES = 64 * 1024;

/**
 * What undici's request() does with a request body it will not send on: destroyed, but a client
 * request is first detached from its socket (as in nodejs/node#38505) so that the connection
 * survives to carry the gateway's error response. An h2 request is not destroyed, which would reset
 * its stream before the answer: its rest is discarded, and node resets the stream once answered.
 */
function dropUpload(body: Readable, err: Error): void {
  if (body.destroyed) return;
  body.on('error', noop);
  if (body instanceof Http2ServerRequest) {
    body.resume();
    return;
  }
  if (body instanceof IncomingMessage) (body as { socket: unknown }).socket = null;
  body.destroy(err);
}

/**
 * Forwards `req` as planned and streams the answer into `res`. Calls `failed` with a GatehouseError
 * (UPSTREAM_TIMEOUT, UPSTREAM_UNREACHABLE) while nothing was written yet, or with what the exchange
 * threw; nothing when the headers are written (the body keeps streaming) or the client is gone.
 * A failure after the headers can only cut the connection. A callback rather than a promise: the
 * proxy's async function awaiting a promise costs a promise and a microtask per request.
 */
export function forward(req: IncomingMessage, res: ProxyResponse, plan: ForwardPlan, deps: ForwardDeps, failed: (err: unknown) => void): void {
  if (res.destroyed) return; // the client left while the request was being authorized
  new Exchange(req, res, plan, deps, null, (err) => {
    if (err !== null) failed(err);
  }).start();
}

/** The request body as it goes upstream (plugin wrappers, then the token observer's tap), null when none. */
export function requestBodyOf(req: IncomingMessage, plan: ForwardPlan): Readable | null {
  if (!requestHasBody(req)) return null;
  const { observer, plugins } = plan;
  const body = plugins ? plugins.requestBody(req) : req;
  return observer
    ? pipeline(
        body,
        tap((chunk) => observer.requestChunk(chunk)),
        noop,
      )
    : body;
}

/** One attempt of the forward hooks (forward-hooks.ts): its own body stream, and whether undici has started reading it. */
export interface AttemptBody {
  body: Readable | null;
  started(): boolean;
}

/**
 * One attempt for the forward hooks: resolves with its UpstreamOutcome once the upstream's status
 * and headers are known (nothing written yet: `deliver()` writes and streams them, `discard()`
 * cuts the attempt), or with its error (the client leaving included).
 */
export function forwardAttempt(
  req: IncomingMessage,
  res: ServerResponse,
  plan: ForwardPlan,
  deps: ForwardDeps,
  attempt: AttemptBody,
  started?: AttemptStarted,
): Promise<UpstreamOutcome> {
  return new Promise((resolve) => {
    new Exchange(req, res, plan, deps, attempt, (error, outcome) =>
      resolve(error !== null ? { kind: 'error', error: error as GatehouseError } : outcome!),
    ).start(started);
  });
}

type UpstreamHeaders = Record<string, string | string[] | undefined>;

/** What undici is asked to send upstream: the method, the planned path and headers (a gRPC call's grpc-timeout as the time left), the body. */
function upstreamRequest(req: IncomingMessage, plan: ForwardPlan, body: Readable | null, deadline: number | null): Dispatcher.DispatchOptions {
  return {
    method: req.method as Dispatcher.HttpMethod,
    path: plan.path,
    headers: deadline === null ? plan.headers : withGrpcTimeout(plan.headers, deadline - performance.now()),
    body,
    // The pool's header and body timeouts (upstream-pools.ts) are backstops; the route's header wait is
    // headerWait's. A wait longer than the pool's would otherwise be cut short by undici's. (undefined: the
    // pool's, without the per-request object a conditional spread would build.)
    headersTimeout: plan.headersTimeoutMs >= UPSTREAM_IDLE_TIMEOUT_MS ? plan.headersTimeoutMs + 1_000 : undefined,
  };
}

/** What an exchange that fails before the response headers fails with: the header wait's or deadline's timeout, else the upstream's error. */
function failureBeforeHead(headerWait: HeaderWait, err: Error): GatehouseError {
  if (!headerWait.fired) return upstreamError(err);
  const why = headerWait.byDeadline ? "the gRPC call's grpc-timeout passed before the upstream's response headers" : 'upstream response headers timed out';
  return new GatehouseError('UPSTREAM_TIMEOUT', why, { cause: err });
}

/**
 * One exchange, and undici's dispatch handler for it: forward() when `attempt` is null; forwardAttempt() otherwise
 * (the response is then parked at its start). `settle` is called once: with null (and an attempt's outcome) or with
 * the error. Its state goes waiting for the response headers → (parked: an attempt's, until delivered) → streaming
 * the body → done. A class, its steps methods of the prototype: a request makes this one object, where closures
 * over its variables would make one function each (scripts/alloc-per-request.sh).
 */
class Exchange implements Dispatcher.DispatchHandler {
  /**
   * Counted from the dispatch to undici's end of the request, onResponseEnd or onResponseError: every
   * dispatched request gets one of them once, whatever ends it (the response complete, the client gone, a
   * timeout, an upstream failure, an attempt discarded by retry), so this is the one place an attempt ends.
   */
  private load: TargetLoad | null = null;
  private settled = false;
  private controller: Dispatcher.DispatchController | null = null;
  /** An abort requested before undici handed out the controller (request still queued). */
  private pendingAbort: Error | null = null;
  /** The client closed its connection before the response was complete. */
  private clientGone = false;
  private state: 'waiting' | 'parked' | 'streaming' | 'done' = 'waiting';
  private paused = false;
  /** Where response body chunks go: the client, or the observer stage in front of it. */
  private sink: Writable;
  private body: Readable | null = null;
  private headerWait: HeaderWait | null = null;
  private started = 0;
  /** The response's end: the upstream's trailers (when the client takes them) go with it. */
  private trailers: UpstreamHeaders | null | undefined = null;
  /** A gRPC status the upstream sent in its head (takeGrpcStatus), for the h2 client's trailers. */
  private headStatus: OutgoingHttpHeaders | null = null;
  /** The upstream head's grpc-status (a Trailers-Only answer's), left in the head for an HTTP/1.1 client. */
  private headGrpcStatus: string | string[] | undefined = undefined;
  /** Why a parked response can no longer be delivered (it failed while the hooks decided). */
  private parkedError: GatehouseError | null = null;
  /** The parked response's body chunks, null when not parked. */
  private held: Buffer[] | null = null;
  private heldBytes = 0;
  private heldEnded = false;

  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly plan: ForwardPlan,
    private readonly deps: ForwardDeps,
    private readonly attempt: AttemptBody | null,
    private readonly settle: (error: unknown, outcome: UpstreamOutcome | null) => void,
  ) {
    this.sink = res;
  }

  /** A client that goes away aborts the upstream request (and its streamed bodies). Bound: it is the response's 'close' listener. */
  private readonly onClientClose = (): void => {
    if (this.res.writableFinished) return;
    this.clientGone = true;
    this.abort(new errors.RequestAbortedError());
  };

  /** The client (or the first body stage) caught up: undici goes on. Bound: it is the sink's 'drain' listener. */
  private readonly resume = (): void => {
    this.paused = false;
    this.controller?.resume();
  };

  /** Dispatches the request upstream; fails at once when the gRPC call's deadline has passed or the dispatch throws. */
  start(onStarted?: AttemptStarted): void {
    const { req, res, plan, attempt } = this;
    try {
      const late = timeUp(res);
      if (late) {
        this.reject(late);
        return;
      }
      const deadline = (res as ProxyResponse).deadline ?? null;
      if (attempt || !(res instanceof ProxyResponse)) res.once('close', this.onClientClose);
      else res.onClientClose = this.onClientClose;
      // Abandoned (cb's timeout): the upstream request is cut now, not left to run to its headers or the route's wait.
      onStarted?.(() => this.abort(new errors.RequestAbortedError()));
      const body = (this.body = attempt ? attempt.body : requestBodyOf(req, plan));
      this.headerWait = new HeaderWait(req, body !== null, plan.headersTimeoutMs, deadline, () => this.timedOut());
      this.started = performance.now();
      if ((this.load = plan.load)) this.load.inFlight++;
      plan.pool.dispatch(upstreamRequest(req, plan, body, deadline), this);
    } catch (err) {
      // A throw fails the exchange, as it would fail a promise's executor.
      this.load = unload(this.load);
      this.reject(err);
    }
  }

  private resolve(outcome: UpstreamOutcome | null = null): void {
    if (this.settled) return;
    this.settled = true;
    this.settle(null, outcome);
  }

  private reject(error: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.settle(error, null);
  }

  private abort(reason: Error): void {
    if (this.controller) this.controller.abort(reason);
    else this.pendingAbort ??= reason;
  }

  /** The header wait or the call's deadline ran out. */
  private timedOut(): void {
    this.abort(this.state === 'waiting' ? new errors.HeadersTimeoutError() : new errors.BodyTimeoutError("the gRPC call's grpc-timeout passed"));
  }

  /** Headers are gone: the only honest signal left is a cut connection. */
  private streamFailed(err: NodeJS.ErrnoException): void {
    if (!this.clientGone) {
      this.deps.logger.warn({ requestId: this.plan.requestId, route: this.plan.routeId, err }, 'response stream failed');
    }
    this.res.destroy();
  }

  /** The response's end, with the upstream's trailers when the client takes them (or a plugin does). */
  private end(): void {
    const { req, res, plan } = this;
    this.state = 'done';
    const fields = this.trailers && trailerFields(this.trailers);
    const all = this.headStatus ? { ...this.headStatus, ...fields } : fields;
    recordGrpcStatus(res, this.deps.metrics, plan.routeId, all?.['grpc-status'] ?? this.headGrpcStatus);
    if (all) {
      if (plan.plugins?.trailersTo) plan.plugins.trailersTo(all);
      else if (takesTrailers(req)) res.addTrailers(all);
    }
    this.sink.end();
  }

  /** Writes the response head and starts streaming the body; a GatehouseError when Node refused the head. */
  private respond(c: Dispatcher.DispatchController, statusCode: number, headers: UpstreamHeaders): GatehouseError | null {
    const { req, res, plan } = this;
    const { observer, plugins } = plan;
    const out = clientResponseHeaders(headers, plan.requestId);
    this.headGrpcStatus = headers['grpc-status'];
    if (isHttp2(req)) this.headStatus = takeGrpcStatus(out);
    const transforms = plugins ? plugins.responseStart(statusCode, out) : null;
    if (this.deps.draining()) out.connection = 'close';
    try {
      res.writeHead(statusCode, out);
    } catch (err) {
      // Node refuses some header values undici accepts (e.g. invalid characters): the upstream's fault.
      this.state = 'done';
      c.abort(err as Error);
      return upstreamError(err);
    }
    this.state = 'streaming';
    this.deps.metrics?.request(plan.routeId, statusCode);
    // Body stages in front of the client: the observer sees the upstream's bytes, then plugin transforms.
    const stages: Transform[] = transforms ?? [];
    if (observer) {
      try {
        observer.response(statusCode, headers);
      } catch {
        // bookkeeping only
      }
      stages.unshift(observedResponse(observer));
    }
    if (stages.length > 0) {
      this.sink = stages[0]!;
      pipeline([...stages, res], (err) => {
        if (err) this.streamFailed(err);
      });
    }
    return null;
  }

  /**
   * An attempt's response waits here until a forward hook delivers or discards it (a few microtasks
   * for retry and cb). The body bytes that arrive meanwhile are held, up to PARKED_BYTES, and undici
   * is paused only past that: a small response is then complete before the hook decides, so a
   * retried answer is dropped without aborting it and its connection stays open for reuse (pausing
   * at once left the response unfinished, and discarding it cut the connection). CPU per request on
   * a retry route was not told apart either way (scripts/gc-per-request.sh method, alternated runs).
   */
  private park(c: Dispatcher.DispatchController, statusCode: number, headers: UpstreamHeaders): void {
    this.state = 'parked';
    this.held = [];
    this.resolve({
      kind: 'response',
      status: statusCode,
      headers,
      deliver: () => this.deliver(c, statusCode, headers),
      discard: () => this.discard(c),
    });
  }

  /** A forward hook takes the parked response: its head is written, the held body chunks follow. */
  private deliver(c: Dispatcher.DispatchController, statusCode: number, headers: UpstreamHeaders): void {
    if (this.state !== 'parked') throw this.parkedError ?? new GatehouseError('UPSTREAM_UNREACHABLE', 'upstream response already used');
    const chunks = this.held!;
    this.held = null;
    if (this.res.destroyed) {
      // The client left while the hooks decided (a complete response aborts nothing): nobody to deliver to.
      this.state = 'done';
      return;
    }
    const failure = this.respond(c, statusCode, headers);
    if (failure) throw failure;
    // undici is paused here only when the held bytes passed PARKED_BYTES.
    const wasPaused = this.paused;
    this.paused = false;
    for (const chunk of chunks) this.send(c, chunk);
    if (this.heldEnded) this.end();
    else if (wasPaused && !this.paused) c.resume();
  }

  /** A forward hook drops the parked response (a retry moves on): an unfinished one is cut. */
  private discard(c: Dispatcher.DispatchController): void {
    this.res.off('close', this.onClientClose);
    if (this.state !== 'parked') return;
    this.state = 'done';
    this.held = null;
    if (!this.heldEnded) c.abort(new errors.RequestAbortedError());
  }

  /** Writes a body chunk to the client (or the first body stage), pausing undici while it is behind. */
  private send(c: Dispatcher.DispatchController, chunk: Buffer): void {
    if (!this.sink.write(chunk) && !this.paused) {
      this.paused = true;
      c.pause();
      this.sink.once('drain', this.resume);
    }
  }

  /** The request body will not be sent on: what undici's request() does with it (dropUpload). */
  private dropBody(err: Error): void {
    const body = this.body;
    if (!body) return;
    // A wrapped body (plugins, observer) stands in front of the client's request: that one is
    // detached from its socket first, so the connection survives to carry the error response.
    // An attempt whose body was never read leaves the client's request to the next attempt.
    if (body !== this.req && (!this.attempt || this.attempt.started())) dropUpload(this.req, err);
    dropUpload(body, err);
    this.body = null;
  }

  onRequestStart(c: Dispatcher.DispatchController): void {
    this.controller = c;
    if (this.pendingAbort) c.abort(this.pendingAbort);
  }

  onResponseStart(c: Dispatcher.DispatchController, statusCode: number, headers: UpstreamHeaders): void {
    if (statusCode < 200) return; // informational: the final response follows
    this.headerWait!.responded();
    this.deps.metrics?.upstream(this.plan.routeId, (performance.now() - this.started) / 1000);
    if (this.attempt) {
      this.park(c, statusCode, headers);
      return;
    }
    const failure = this.respond(c, statusCode, headers);
    if (failure) this.reject(failure);
    else this.resolve();
  }

  onResponseData(c: Dispatcher.DispatchController, chunk: Buffer): void {
    const held = this.held;
    if (held === null) {
      this.send(c, chunk);
      return;
    }
    held.push(chunk);
    this.heldBytes += chunk.length;
    if (this.heldBytes > PARKED_BYTES && !this.paused) {
      this.paused = true;
      c.pause();
    }
  }

  onResponseEnd(_c: Dispatcher.DispatchController, trailers: UpstreamHeaders): void {
    this.headerWait!.clear();
    this.load = unload(this.load);
    this.trailers = trailers;
    if (this.held !== null) {
      this.heldEnded = true;
      return;
    }
    this.end();
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    this.load = unload(this.load);
    this.headerWait!.clear();
    this.dropBody(err);
    const was = this.state;
    this.state = 'done';
    if (was === 'waiting') {
      // A client gone before the head has nobody left to answer (an attempt's hook still hears of it).
      if (this.headerWait!.fired || this.attempt || !(this.clientGone || this.res.destroyed)) this.reject(failureBeforeHead(this.headerWait!, err));
      else this.resolve();
      if (this.attempt) this.res.off('close', this.onClientClose);
    } else if (was === 'parked') {
      this.held = null;
      this.parkedError = upstreamError(err);
    } else if (was === 'streaming') {
      if (this.sink === this.res) this.streamFailed(err);
      else this.sink.destroy(err);
    }
  }
}
