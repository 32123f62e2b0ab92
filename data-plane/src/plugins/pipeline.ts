/**
 * The plugin pipeline of one route: its enabled plugins' hooks, built once per snapshot
 * (compiled configs come from proto/src/plugins), run per request in one fixed order:
 *
 * | # | stage                         | plugins                  | hook      | can                                               |
 * |---|-------------------------------|--------------------------|-----------|---------------------------------------------------|
 * | 0 | credential fields             | (the gateway's, on routes| request   | refuse (400) a request with two of a field an     |
 * |   |                               | with an auth plugin)     |           | authentication plugin reads (credential-fields.ts)|
 * | 1 | cross-origin                  | cors                     | request   | answer a preflight (204); add client headers      |
 * | 2 | admission                     | ip_restriction,          | request   | refuse (403);                                     |
 * |   |                               | rate_limit               |           | answer 429; add client headers                    |
 * | 3 | authentication                | oauth2, basic_auth,      | request   | refuse (400/401; oauth2 403 on scope)             |
 * |   |                               | key_auth, openid_connect |           | openid_connect: answer sign-in redirects          |
 * | 3b| authorization                 | acl                      | request   | refuse (403)                                      |
 * | 4 | request size                  | body_limit               | request   | refuse (413); wrap the request body               |
 * | 4a| termination                   | request_termination,     | request   | answer with a fixed response;                     |
 * |   |                               | redirect                 |           | answer a redirect (Location)                      |
 * | 4b| request validation            | request_validator        | request   | refuse (400, 413, 415); buffer the body, replace  |
 * |   |                               |                          |           | its stream and Content-Length                     |
 * | 4c| protocol translation          | grpc_web                 | request,  | rewrite Content-Type, decode the body (gRPC-Web → |
 * |   |                               |                          | response  | gRPC); trailers into the response body            |
 * | 5 | request rewriting             | request_transformer      | request   | edit upstream headers and query                   |
 * | 5a| mirroring                     | request_mirror           | request   | copy the request (and its body) for a mirror      |
 * | 6 | forward                       | retry, cb                | forward   | wrap the upstream exchange                        |
 * | 7 | response rewriting            | response_transformer     | response  | edit response headers                             |
 * | 8 | response encoding             | compression              | response  | edit headers; transform the body                  |
 * | 9 | response cache                | proxy_cache              | request,  | answer a hit (after admission and authentication);|
 * |   |                               |                          | response  | copy the final response body (a Transform)        |
 *
 * The order is the registry's (proto/src/plugins/index.ts), not the definition's. Before any of them the client's
 * header list has lost what its Connection names (proxy/headers.ts withoutConnectionNamed), so those names never
 * take a header a plugin sets. A route without
 * enabled plugins has no pipeline at all (null): the proxy checks one field and allocates nothing,
 * as fastify does with empty hook lists.
 *
 * Hooks (a stage implements the ones it needs):
 * - `request(ex)`: runs before a target is picked. Returns nothing to go on, or a PluginAnswer the
 *   gateway sends at once (a preflight); throws a GatehouseError to refuse (401, 413, 429). It may
 *   edit `ex.headers` (the client's raw header list: the gateway's own rules, hop-by-hop removal,
 *   Host, X-Forwarded-*, X-Request-Id, are applied after it, so they always hold) and `ex.query`;
 *   add headers to whatever the client gets with `ex.addClientHeader` (the upstream's response, a
 *   PluginAnswer or a gateway error alike: CORS and rate-limit headers); and wrap the request body
 *   stream with `ex.wrapBody` (counting, limiting), or read it whole and hand on the bytes with `ex.replaceBody`
 *   (request_validator). May return a promise (oauth2's token store), but
 *   returns synchronously when the outcome is known at once (a cache hit): a promise costs the
 *   proxy a microtask turn.
 * - `response(ex, status, headers)`: runs when the upstream's status and headers are known, before
 *   they are written; edits `headers` in place (lower-case names, node:http's OutgoingHttpHeaders)
 *   and may return a Transform the response body is piped through (compression; it must then
 *   drop content-length itself). Not run for gateway answers and errors.
 * - `forward(ex, next)` (retry, cb): wraps the upstream exchange. `next()`
 *   dispatches one attempt and resolves with its UpstreamOutcome once the upstream's status and
 *   headers are known, or with its connection error, before anything is written to the client;
 *   the hook returns the outcome to deliver: after calling `next` again (retry: only while the
 *   request body has not started streaming), or without calling it (an open breaker
 *   answers 503 without touching the upstream). Outcomes not delivered must be `discard()`ed.
 *   proxy/forward-hooks.ts runs them outermost first, and sets `ex.target` before each attempt.
 */
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import { Readable, type Transform } from 'node:stream';
import type { GatehouseError } from '#proto/errors';
import type { CompiledRoute, CompiledTarget } from '#proto/compile/index';
import type { RouteMatch } from '#proto/routing/index';
import type { CacheLookup } from './proxy-cache/index.js';
import type { GrpcWebMode } from './grpc-web.js';
import type { MirrorCopy } from './request-mirror.js';

/** A response the gateway sends itself instead of forwarding (a CORS preflight, a proxy_cache hit, a redirect). */
export interface PluginAnswer {
  status: number;
  /** Win over the client headers of the exchange; content-length and x-request-id are the gateway's (a HEAD answer's content-length is kept). */
  headers?: OutgoingHttpHeaders;
  /** Sent as is; none when absent. */
  body?: string | Buffer;
  /** The answer as text, for a gRPC client's grpc-message (proxy/gateway-answers.ts sendAnswer); absent: the status's reason phrase. */
  message?: string;
}

// biome-ignore lint/suspicious/noConfusingVoidType: a hook that lets the request pass returns nothing; hooks are written `(): void`.
export type RequestHook = (ex: PluginExchange) => PluginAnswer | void | Promise<PluginAnswer | void>;
// biome-ignore lint/suspicious/noConfusingVoidType: as RequestHook, a hook that leaves the body alone returns nothing.
export type ResponseHook = (ex: PluginExchange, status: number, headers: OutgoingHttpHeaders) => Transform | void;

/** What one upstream attempt gave, before anything reached the client. */
export type UpstreamOutcome =
  | {
      kind: 'response';
      status: number;
      headers: Readonly<Record<string, string | string[] | undefined>>;
      /** Streams this response to the client (response hooks run first). */
      deliver(): void;
      /** Drops this response (its connection is aborted or drained). */
      discard(): void;
    }
  | { kind: 'error'; error: GatehouseError };

/**
 * Given to `next()` by a hook that may give up on the attempt before it settles (cb's timeout): called with the
 * attempt's `abandon`, which cuts its upstream request at once. A hook that passes none down leaves the one it was
 * given to the attempts it starts.
 */
export type AttemptStarted = (abandon: () => void) => void;
export type ForwardNext = (started?: AttemptStarted) => Promise<UpstreamOutcome>;
export type ForwardHook = (ex: PluginExchange, next: ForwardNext) => Promise<UpstreamOutcome>;

/** A plugin's hooks for one route, closed over its compiled config. */
export interface PluginStage {
  request?: RequestHook;
  response?: ResponseHook;
  forward?: ForwardHook;
}

export interface Pipeline {
  readonly request: readonly RequestHook[];
  readonly response: readonly ResponseHook[];
  readonly forward: readonly ForwardHook[];
}

/** Stages in execution order → hook lists; null when no stage has a hook (nothing to run). */
export function pipelineOf(stages: readonly PluginStage[]): Pipeline | null {
  const pick = <K extends keyof PluginStage>(key: K) => stages.flatMap((s) => (s[key] ? [s[key]!] : []));
  const pipeline = { request: pick('request'), response: pick('response'), forward: pick('forward') };
  return pipeline.request.length + pipeline.response.length + pipeline.forward.length === 0 ? null : pipeline;
}

const NO_GROUPS: readonly string[] = Object.freeze([]);

/** Headers whose values the gateway combines with the upstream's rather than replacing them. */
const COMBINED = new Set(['vary']);

/**
 * One request's walk through a pipeline; created only for routes that have one. A class, so every
 * exchange shares one shape and the hot path stays monomorphic.
 */
export class PluginExchange {
  /** The client's raw header list as forwarded (before the gateway's own rules); copy before editing. */
  headers: readonly string[];
  /** The query string for the upstream, raw, without '?' ('' when none). */
  query: string;
  /** Headers for the client's response, whatever it is; null until a hook adds one. */
  clientHeaders: OutgoingHttpHeaders | null = null;
  /** Forward hooks: the upstream target of the current attempt (set by the proxy before each attempt). */
  target: CompiledTarget | null = null;
  /** Forward hooks: true once a byte of the request body went to an upstream (no attempt may follow, unless bodyKept). */
  bodySent = false;
  /** Forward hooks: a gRPC call's whole body is kept (forward-hooks.ts), so an attempt after a Trailers-Only answer can resend it. */
  bodyKept = false;
  /** Who the route's authentication found (key_auth's key owner, basic_auth's user): the upstream's X-Consumer-Username. */
  consumer: string | null = null;
  /**
   * Who the route's authentication found, whichever plugin did (key_auth's and basic_auth's consumer, oauth2's token
   * subject, openid_connect's `sub`): part of proxy_cache's key. null: nobody was authenticated.
   */
  identity: string | null = null;
  /** The identity came from the Authorization header or a session cookie: proxy_cache stores nothing for it unless `per_consumer`. */
  personal = false;
  /** That consumer's groups (its credential's), which acl judges. */
  consumerGroups: readonly string[] = NO_GROUPS;
  /** acl: the upstream's X-Consumer-Groups (the consumer's groups, joined); null for none. */
  groupsHeader: string | null = null;
  /** proxy_cache: what its request hook decided, for its response hook. */
  cacheLookup: CacheLookup | null = null;
  /** request_mirror: the copy the proxy sends to the mirror once the upstream request is planned; null when none. */
  mirror: MirrorCopy | null = null;
  /** grpc_web: the request is gRPC-Web's (its request hook), for its response hook. */
  grpcWeb: GrpcWebMode | null = null;
  /**
   * Set by a response hook that carries the upstream's trailers itself (grpc_web, in the body): forward.ts then
   * hands them here, before the body ends, instead of to the client's response.
   */
  trailersTo: ((trailers: OutgoingHttpHeaders) => void) | null = null;
  readonly route: CompiledRoute;
  /** The part of `path` the route's listen_path matched (L of docs/proxy.md "Proxy behaviour"). */
  readonly matched: string;
  private bodyWrappers: ((body: Readable) => Readable)[] | null = null;

  constructor(
    readonly req: IncomingMessage,
    match: RouteMatch,
    readonly requestId: string,
    /** The request path as the proxy normalised it (without the query). */
    readonly path: string,
    query: string,
    private readonly pipeline: Pipeline,
  ) {
    this.route = match.route;
    this.matched = match.matched;
    this.headers = req.rawHeaders;
    this.query = query;
  }

  /** key_auth, basic_auth: `username` authenticated; its groups are its entry in `groupsByUser`, if any. `personal`: by Authorization. */
  authenticate(username: string, groupsByUser: ReadonlyMap<string, readonly string[]>, personal: boolean): void {
    this.consumer = username;
    this.consumerGroups = groupsByUser.get(username) ?? NO_GROUPS;
    this.identity = `consumer:${username}`;
    this.personal = personal;
  }

  /** Adds a header to the client's response (lower-case name); `vary` values accumulate. */
  addClientHeader(name: string, value: string): void {
    const headers = (this.clientHeaders ??= {});
    const previous = headers[name];
    headers[name] = previous !== undefined && COMBINED.has(name) ? `${String(previous)}, ${value}` : value;
  }

  /** The request body (when there is one) is piped through `wrap`'s stream on its way upstream. */
  wrapBody(wrap: (body: Readable) => Readable): void {
    (this.bodyWrappers ??= []).push(wrap);
  }

  /**
   * request_validator: the body was read whole (through the wrappers so far, as `requestBody` gives it); the upstream
   * gets these bytes, through the wrappers added from now on.
   */
  replaceBody(bytes: Buffer): void {
    this.bodyWrappers = [() => Readable.from([bytes], { objectMode: false })];
  }

  /** forward.ts: the body stream to send upstream. */
  requestBody(body: Readable): Readable {
    if (!this.bodyWrappers) return body;
    let out = body;
    for (const wrap of this.bodyWrappers) out = wrap(out);
    return out;
  }

  /** forward.ts: the client headers merged in, then the response hooks; returns body transforms (or null). */
  responseStart(status: number, headers: OutgoingHttpHeaders): Transform[] | null {
    mergeClientHeaders(headers, this.clientHeaders);
    let transforms: Transform[] | null = null;
    for (const hook of this.pipeline.response) {
      const transform = hook(this, status, headers);
      if (transform) (transforms ??= []).push(transform);
    }
    return transforms;
  }
}

/** The gateway's headers win over the upstream's, except those combined (Vary). */
export function mergeClientHeaders(into: OutgoingHttpHeaders, added: OutgoingHttpHeaders | null): void {
  if (!added) return;
  for (const name in added) {
    const previous = into[name];
    into[name] = previous !== undefined && COMBINED.has(name) ? `${String(previous)}, ${String(added[name])}` : added[name];
  }
}

export function isPromise<T>(value: unknown): value is Promise<T> {
  return typeof (value as Promise<T> | undefined)?.then === 'function';
}

/**
 * Runs the request hooks in order; the first answer ends the walk, a GatehouseError refuses (as a
 * rejection, never a synchronous throw). Not an async function, and it returns the answer (or null)
 * itself while every hook returns synchronously (all but oauth2's and basic_auth's on a cache miss,
 * and rate_limit with Redis): the walk then allocates no promise and the proxy goes on in the same
 * tick, without a microtask. Only from the first promise on does it continue asynchronously.
 */
export function runRequestHooks(pipeline: Pipeline, ex: PluginExchange): PluginAnswer | null | Promise<PluginAnswer | null> {
  try {
    return runFrom(pipeline.request, 0, ex);
  } catch (err) {
    return Promise.reject(err);
  }
}

function runFrom(hooks: readonly RequestHook[], start: number, ex: PluginExchange): PluginAnswer | null | Promise<PluginAnswer | null> {
  for (let i = start; i < hooks.length; i++) {
    const result = hooks[i]!(ex);
    if (isPromise<Awaited<ReturnType<RequestHook>>>(result)) return result.then((answer) => answer || runFrom(hooks, i + 1, ex));
    if (result) return result;
  }
  return null;
}
