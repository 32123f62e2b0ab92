/**
 * One upstream exchange: the client's request streamed to the upstream, the upstream's response
 * streamed back. Driven through undici's dispatch handler rather than `request()`: body chunks go
 * from undici's parser straight to the client's socket (pausing undici while the client is
 * behind), without a Readable per response, a stream.pipeline per response and an AbortController
 * per request. Measured under load, dropping those more than halved the proxy's CPU time per
 * request (stream.pipeline alone aborts an internal AbortController per call, and every abort
 * builds a DOMException with a stack trace). Semantics are those of the request()-based version:
 * the proxy-server tests pin them. Routes with forward hooks (retry, cb) use forwardAttempt
 * (forward-hooks.ts): the same exchange, its response parked at its start until a hook delivers it.
 */
import { IncomingMessage, ServerResponse, type OutgoingHttpHeaders } from 'node:http';
import { performance } from 'node:perf_hooks';
import { pipeline, Transform, type Readable, type Writable } from 'node:stream';
import { errors, util, type Dispatcher } from 'undici';
import { GatehouseError } from '#proto/errors';
import type { Logger } from '#proto/logger';
import { observedResponse, type EndpointObserver } from '../auth/index.js';
import type { PluginExchange, UpstreamOutcome } from '../plugins/index.js';
import type { Socket } from 'node:net';
import type { AccessRecord } from './access-log.js';
import { clientResponseHeaders } from './headers.js';
import type { ProxyMetrics } from './proxy-metrics.js';
import { upstreamError } from './upstream-error.js';

const { parseHeaders } = util;

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
}

/**
 * The proxy listener's responses (createServer's ServerResponse option): the listener's one 'close'
 * listener runs the plain exchange's `onClientClose`, which so needs no listener of its own.
 * Two `once('close')` per request measured 0.41 µs against 0.23 µs for one (EventEmitter
 * micro-benchmark, same run: each once() binds a wrapper and the second turns the slot into an array).
 */
export class ProxyResponse extends ServerResponse {
  exchange: ClientCloseListener | null = null;
  /** The proxy listener's access record of this request (proxy-server.ts), null when the log is off. */
  access: AccessRecord | null = null;
  /** The client's connection: `socket` is detached by the time 'close' is emitted. */
  clientSocket: Socket | null = null;
}

export interface ClientCloseListener {
  onClientClose(): void;
}

export interface ForwardDeps {
  logger: Logger;
  metrics?: ProxyMetrics;
  /** True once the listener is closing: responses then carry `Connection: close`. */
  draining(): boolean;
}

function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
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
 * undici runs its headersTimeout on a coarse timer (about 1 s resolution), so a "250ms"
 * response_header_timeout would fire after about a second. Below that resolution a native timer
 * aborts the request instead, armed once the request body has been handed over (at dispatch when
 * there is none), so upload time never counts; connect time of a new connection does. At 1 s and
 * above undici's own timer is precise enough and no timer is created per request.
 */
const UNDICI_TIMER_RESOLUTION_MS = 1_000;

interface HeaderTimer {
  readonly fired: boolean;
  clear(): void;
}

const NO_TIMER: HeaderTimer = { fired: false, clear: () => undefined };

function preciseHeaderTimer(req: IncomingMessage, hasRequestBody: boolean, timeoutMs: number, abort: () => void): HeaderTimer {
  if (timeoutMs >= UNDICI_TIMER_RESOLUTION_MS) return NO_TIMER;
  let fired = false;
  let settled = false;
  let timer: NodeJS.Timeout | undefined;
  const arm = (): void => {
    if (settled) return;
    timer = setTimeout(() => {
      fired = true;
      abort();
    }, timeoutMs);
  };
  if (hasRequestBody && !req.readableEnded) req.once('end', arm);
  else arm();
  return {
    get fired() {
      return fired;
    },
    clear() {
      settled = true;
      clearTimeout(timer);
      req.off('end', arm);
    },
  };
}

function noop(): void {}

/**
 * What undici's request() does with a request body it will not send on: destroyed, but a client
 * request is first detached from its socket (as in nodejs/node#38505) so that the connection
 * survives to carry the gateway's error response.
 */
function dropUpload(body: Readable, err: Error): void {
  if (body.destroyed) return;
  body.on('error', noop);
  if (body instanceof IncomingMessage) (body as { socket: unknown }).socket = null;
  body.destroy(err);
}

/**
 * Forwards `req` as planned and streams the answer into `res`. Calls `failed` with a GatehouseError
 * (UPSTREAM_TIMEOUT, UPSTREAM_UNREACHABLE) while nothing was written yet, or with what the exchange
 * threw; nothing when the headers are written (the body keeps streaming) or the client is gone.
 * A failure after the headers can only cut the connection. A callback rather than a promise: the
 * proxy's async function awaiting this promise measured 0.49 µs per request against 0.32 µs with a
 * callback (in-process micro-benchmark, same run; the harness's own cost included in both).
 */
export function forward(req: IncomingMessage, res: ProxyResponse, plan: ForwardPlan, deps: ForwardDeps, failed: (err: unknown) => void): void {
  if (res.destroyed) return; // the client left while the request was being authorized
  exchange(req, res, plan, deps, null, (err) => {
    if (err !== null) failed(err);
  });
}

/** The request body as it goes upstream (plugin wrappers, then the token observer's tap), null when none. */
export function requestBodyOf(req: IncomingMessage, plan: ForwardPlan): Readable | null {
  if (!hasBody(req)) return null;
  const { observer, plugins } = plan;
  const body = plugins ? plugins.requestBody(req) : req;
  return observer ? pipeline(body, tap((chunk) => observer.requestChunk(chunk)), noop) : body;
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
export function forwardAttempt(req: IncomingMessage, res: ServerResponse, plan: ForwardPlan, deps: ForwardDeps, attempt: AttemptBody): Promise<UpstreamOutcome> {
  return new Promise((resolve) => {
    exchange(req, res, plan, deps, attempt, (error, outcome) => resolve(error !== null ? { kind: 'error', error: error as GatehouseError } : outcome!));
  });
}

const WAITING = 0;
const PARKED = 1;
const STREAMING = 2;
const DONE = 3;
/** waiting for the response headers → (parked: an attempt's, until delivered) → streaming the body → done. */
type State = typeof WAITING | typeof PARKED | typeof STREAMING | typeof DONE;

/**
 * forward() when `attempt` is null; forwardAttempt() otherwise (the response is then parked at its
 * start). `settle` is called once: with null (and an attempt's outcome) or with the error.
 */
function exchange(
  req: IncomingMessage,
  res: ServerResponse,
  plan: ForwardPlan,
  deps: ForwardDeps,
  attempt: AttemptBody | null,
  settle: (error: unknown, outcome: UpstreamOutcome | null) => void,
): void {
  let ex: Exchange | null = null;
  try {
    ex = new Exchange(req, res, plan, deps, attempt, settle);
    plan.pool.dispatch(
      {
        method: req.method as Dispatcher.HttpMethod,
        path: plan.path,
        headers: plan.headers,
        body: ex.body,
        // bodyTimeout is the pool's (upstream-pools.ts); the header wait is per route.
        headersTimeout: plan.headersTimeoutMs,
      },
      ex,
    );
  } catch (err) {
    // What the promise executor this replaced did with a throw: the exchange fails with it.
    if (ex) ex.reject(err);
    else settle(err, null);
  }
}

/**
 * One exchange as undici's handler, in undici's own handler form (onConnect/onHeaders/onData/…, the
 * one its request() and stream() implement): the newer controller form is adapted to it per request
 * (a wrapper and a controller object, and the raw headers parsed into an object that was then
 * copied again for writeHead). One object per exchange instead of a dozen closures; together with
 * the raw-header list (headers.ts) this measured 1.2 µs less CPU per proxied request in the
 * profile under wrk, a third of it in the garbage collector.
 */
class Exchange implements Dispatcher.DispatchHandler, ClientCloseListener {
  /** The request body as it goes upstream; dropped (null) once an error ended the exchange. */
  body: Readable | null;
  /** undici's abort for this request, once handed out (onConnect). */
  private abortUpstream: ((err?: Error) => void) | null = null;
  /** An abort requested before undici handed out its abort (request still queued). */
  private pendingAbort: Error | null = null;
  /** undici's resume for a paused response (from onHeaders). */
  private resumeUpstream: (() => void) | null = null;
  /** The client closed its connection before the response was complete. */
  private clientGone = false;
  private state: State = WAITING;
  private paused = false;
  private settled = false;
  /** Where response body chunks go: the client, or the first stage (observer, plugin transforms) in front of it. */
  private sink: Writable;
  private parkedError: GatehouseError | null = null;
  private onDrain: (() => void) | null = null;
  /** The 'close' listener of an attempt or a response not made by the proxy listener (see ProxyResponse). */
  private readonly closeListener: (() => void) | null = null;
  private readonly headerTimer: HeaderTimer;
  private readonly started: number;

  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly plan: ForwardPlan,
    private readonly deps: ForwardDeps,
    private readonly attempt: AttemptBody | null,
    private readonly settle: (error: unknown, outcome: UpstreamOutcome | null) => void,
  ) {
    this.sink = res;
    if (attempt || !(res instanceof ProxyResponse)) res.once('close', (this.closeListener = () => this.onClientClose()));
    else res.exchange = this;
    this.body = attempt ? attempt.body : requestBodyOf(req, plan);
    this.headerTimer = preciseHeaderTimer(req, this.body !== null, plan.headersTimeoutMs, () => this.abort(new errors.HeadersTimeoutError()));
    this.started = performance.now();
  }

  resolve(outcome: UpstreamOutcome | null = null): void {
    if (this.settled) return;
    this.settled = true;
    this.settle(null, outcome);
  }

  reject(error: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.settle(error, null);
  }

  private abort(reason: Error): void {
    if (this.abortUpstream) this.abortUpstream(reason);
    else this.pendingAbort ??= reason;
  }

  /** A client that goes away aborts the upstream request (and its streamed bodies). */
  onClientClose(): void {
    if (this.res.writableFinished) return;
    this.clientGone = true;
    this.abort(new errors.RequestAbortedError());
  }

  /** Headers are gone: the only honest signal left is a cut connection. */
  private streamFailed(err: NodeJS.ErrnoException): void {
    if (!this.clientGone) {
      this.deps.logger.warn({ requestId: this.plan.requestId, route: this.plan.routeId, err: err.code ?? err.message }, 'response stream failed');
    }
    this.res.destroy();
  }

  private resume(): void {
    this.paused = false;
    this.resumeUpstream?.();
  }

  /** Writes the response head and starts streaming the body; a GatehouseError when Node refused the head. */
  private respond(statusCode: number, raw: Buffer[]): GatehouseError | null {
    const { plan, res } = this;
    const list = clientResponseHeaders(raw, plan.requestId);
    let head: string[] | OutgoingHttpHeaders = list;
    let stages: Transform[] | null = null;
    if (plan.plugins) {
      const headers = parseHeaders(list) as OutgoingHttpHeaders;
      stages = plan.plugins.responseStart(statusCode, headers);
      if (this.deps.draining()) headers.connection = 'close';
      head = headers;
    } else if (this.deps.draining()) {
      list.push('connection', 'close');
    }
    try {
      res.writeHead(statusCode, head);
    } catch (err) {
      // Node refuses some header values undici accepts (e.g. invalid characters): the upstream's fault.
      this.state = DONE;
      this.abortUpstream!(err as Error);
      return upstreamError(err);
    }
    this.state = STREAMING;
    this.deps.metrics?.request(plan.routeId, statusCode);
    // Body stages in front of the client: the observer sees the upstream's bytes, then plugin transforms.
    const { observer } = plan;
    if (observer) {
      try {
        observer.response(statusCode, parseHeaders(raw));
      } catch {
        // bookkeeping only
      }
      (stages ??= []).unshift(observedResponse(observer));
    }
    if (stages && stages.length > 0) {
      this.sink = stages[0]!;
      pipeline([...stages, res], (err) => {
        if (err) this.streamFailed(err);
      });
    }
    return null;
  }

  /** An attempt's response waits here, undici paused, until a forward hook delivers or discards it. */
  private park(statusCode: number, raw: Buffer[]): void {
    this.state = PARKED;
    this.resolve({
      kind: 'response',
      status: statusCode,
      headers: parseHeaders(raw),
      deliver: () => {
        if (this.state !== PARKED) throw this.parkedError ?? new GatehouseError('UPSTREAM_UNREACHABLE', 'upstream response already used');
        const failure = this.respond(statusCode, raw);
        if (failure) throw failure;
        this.resume();
      },
      discard: () => {
        this.res.off('close', this.closeListener!);
        if (this.state !== PARKED) return;
        this.state = DONE;
        this.abortUpstream!(new errors.RequestAbortedError());
      },
    });
  }

  onConnect(abort: (err?: Error) => void): void {
    this.abortUpstream = abort;
    if (this.pendingAbort) abort(this.pendingAbort);
  }

  /** Returns false to pause undici (a parked attempt). */
  onHeaders(statusCode: number, raw: Buffer[], resume: () => void): boolean {
    if (statusCode < 200) return true; // informational: the final response follows
    this.headerTimer.clear();
    this.resumeUpstream = resume;
    this.deps.metrics?.upstream(this.plan.routeId, (performance.now() - this.started) / 1000);
    if (this.attempt) {
      this.park(statusCode, raw);
      return false;
    }
    const failure = this.respond(statusCode, raw);
    if (failure) this.reject(failure);
    else this.resolve();
    return true;
  }

  /** Returns false to pause undici while the client is behind. */
  onData(chunk: Buffer): boolean {
    if (!this.sink.write(chunk) && !this.paused) {
      this.paused = true;
      this.sink.once('drain', (this.onDrain ??= () => this.resume()));
    }
    return !this.paused;
  }

  onComplete(): void {
    this.state = DONE;
    this.sink.end();
  }

  onError(err: Error): void {
    const { req, attempt, headerTimer } = this;
    headerTimer.clear();
    if (this.body) {
      // A wrapped body (plugins, observer) stands in front of the client's request: that one is
      // detached from its socket first, so the connection survives to carry the error response.
      // An attempt whose body was never read leaves the client's request to the next attempt.
      if (this.body !== req && (!attempt || attempt.started())) dropUpload(req, err);
      dropUpload(this.body, err);
      this.body = null;
    }
    const was = this.state;
    this.state = DONE;
    if (was === WAITING) {
      if (headerTimer.fired) this.reject(new GatehouseError('UPSTREAM_TIMEOUT', 'upstream response headers timed out', { cause: err }));
      else if ((this.clientGone || this.res.destroyed) && !attempt) this.resolve(); // nobody left to answer
      else this.reject(upstreamError(err));
      if (attempt) this.res.off('close', this.closeListener!);
    } else if (was === PARKED) {
      this.parkedError = upstreamError(err);
    } else if (was === STREAMING) {
      if (this.sink === this.res) this.streamFailed(err);
      else this.sink.destroy(err);
    }
  }
}
