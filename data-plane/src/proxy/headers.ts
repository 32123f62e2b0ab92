/**
 * Header rules of the forwarded request and response (docs/proxy.md "Proxy behaviour", RFC 9110 §7.6.1): hop-by-hop
 * headers (and any the sender's Connection names) stop at the gateway in both directions; the upstream
 * gets its Host, the gateway's X-Forwarded-* and an X-Request-Id that is echoed to the client.
 */
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import { isHttp2 } from '../plugins/request-framing.js';
import { newRequestId } from '#proto/traceparent';
// undici's own name lower-casing: known names (`Host`, `Content-Type`…) come back as interned
// lower-case strings from a table, without a copy; others are lower-cased.
import { addWellKnownHeaderNames, headerNameToString } from './undici.js';
import { GATEWAY_SET_HEADERS, HOP_BY_HOP_HEADERS } from '#proto/plugins/http-syntax';
import { withoutCookies } from '../auth/sealed-cookie.js';

const HOP_BY_HOP = HOP_BY_HOP_HEADERS;
/**
 * Set by the gateway itself, so the client's (and a plugin's) copies are dropped: GATEWAY_SET_HEADERS, which
 * the plugin configs' checks refuse too. X-Consumer-Username (key_auth's and basic_auth's) and X-Consumer-Groups
 * (acl's) are dropped on every route: an upstream reached by routes with and without them could otherwise be told
 * any name or group by a client of the route without. X-Forwarded-Client-Cert likewise (the mutual-TLS
 * listener's, client-certificate.ts). Expect: undici refuses it.
 */
const REPLACED = GATEWAY_SET_HEADERS;
addWellKnownHeaderNames(GATEWAY_SET_HEADERS);

/**
 * Header names listed in Connection values (e.g. `Connection: close, X-Secret`), lower-cased;
 * null when they name nothing beyond the hop-by-hop set (the usual `Connection: keep-alive`).
 */
function connectionTokens(values: readonly string[]): Set<string> | null {
  if (values.length === 1 && (values[0] === 'keep-alive' || values[0] === 'Keep-Alive')) return null;
  const tokens = new Set<string>();
  for (const value of values) {
    for (const token of value.split(',')) {
      const name = token.trim().toLowerCase();
      if (name) tokens.add(name);
    }
  }
  return tokens;
}

/** A client-supplied id is kept only when it is 1-200 visible ASCII characters. */
const SANE_REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

export function requestIdOf(header: string | string[] | undefined): string {
  const value = Array.isArray(header) ? header[0] : header;
  return value !== undefined && SANE_REQUEST_ID.test(value) ? value : newRequestId();
}

export { clientIpOf } from '../plugins/client-ip.js';

/**
 * The client's raw header list without the headers its Connection names (RFC 9110 §7.6.1), before any plugin
 * sees it: those names apply to what the client sent, never to what a plugin adds (X-User-Id, Authorization).
 * The same array when Connection names nothing beyond the hop-by-hop set (the usual case: no copy).
 */
export function withoutConnectionNamed(rawHeaders: readonly string[]): readonly string[] {
  let connection: string[] | null = null;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (headerNameToString(rawHeaders[i]!) === 'connection') (connection ??= []).push(rawHeaders[i + 1]!);
  }
  const named = connection ? connectionTokens(connection) : null;
  if (named === null) return rawHeaders;
  let extra = false;
  for (const name of named) if (!HOP_BY_HOP.has(name)) extra = true;
  if (!extra) return rawHeaders;
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const lower = headerNameToString(rawHeaders[i]!);
    if (!named.has(lower) || HOP_BY_HOP.has(lower)) out.push(rawHeaders[i]!, rawHeaders[i + 1]!);
  }
  return out;
}

export interface ForwardFacts {
  /** Host header for the upstream (from rewrite). */
  host: string;
  /** X-Forwarded-For (client-ip.ts forwardedForUpstream: the list received, the peer appended); undefined: none. */
  forwardedFor: string | undefined;
  /** X-Forwarded-Host: the host the client asked for (client-ip.ts originalHost). */
  forwardedHost: string | undefined;
  /** X-Forwarded-Proto: the scheme the client used (client-ip.ts originalScheme). */
  proto: 'http' | 'https';
  requestId: string;
  /** W3C trace context for the upstream (traceparent.ts): the client's copy is always replaced. */
  traceparent: string;
  /** The client's tracestate is forwarded only along with its valid traceparent. */
  keepTracestate: boolean;
  /** The authenticated consumer (PluginExchange.consumer), sent as X-Consumer-Username; null when none. */
  consumer: string | null;
  /** The consumer's groups as acl sends them (PluginExchange.groupsHeader), X-Consumer-Groups; null when none. */
  consumerGroups: string | null;
  /** X-Forwarded-Client-Cert (client-certificate.ts); null when the listener asks for no certificate. */
  clientCert: string | null;
  /** Cookies no upstream gets (openid_connect's session and flow cookies, ServingTable.sessionCookies); null: none. */
  sessionCookies: ReadonlySet<string> | null;
}

/**
 * Upstream request headers as undici's flat [name, value, ...] list, built from the header list as the plugins
 * left it (withoutConnectionNamed applied already) so duplicates and order survive. The client's X-Forwarded-*
 * lines are replaced by the gateway's (`facts`): X-Forwarded-For appended to, -Proto and -Host the client's only
 * from a peer in TRUSTED_PROXIES.
 */
export function upstreamRequestHeaders(rawHeaders: readonly string[], facts: ForwardFacts): string[] {
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const value = rawHeaders[i + 1]!;
    const lower = headerNameToString(name);
    if (HOP_BY_HOP.has(lower) || REPLACED.has(lower) || (lower === 'tracestate' && !facts.keepTracestate)) continue;
    if (lower === 'cookie' && facts.sessionCookies !== null) {
      const kept = withoutCookies(value, facts.sessionCookies);
      if (kept !== null) out.push(name, kept);
      continue;
    }
    out.push(name, value);
  }
  out.push('host', facts.host);
  if (facts.forwardedFor !== undefined) out.push('x-forwarded-for', facts.forwardedFor);
  out.push('x-forwarded-proto', facts.proto);
  if (facts.forwardedHost !== undefined) out.push('x-forwarded-host', facts.forwardedHost);
  out.push('x-request-id', facts.requestId, 'traceparent', facts.traceparent);
  if (facts.consumer !== null) out.push('x-consumer-username', facts.consumer);
  if (facts.consumerGroups !== null) out.push('x-consumer-groups', facts.consumerGroups);
  if (facts.clientCert !== null) out.push('x-forwarded-client-cert', facts.clientCert);
  return out;
}

/** Response headers for the client: the upstream's minus hop-by-hop, plus our X-Request-Id. */
export function clientResponseHeaders(upstream: IncomingHttpHeaders, requestId: string): OutgoingHttpHeaders {
  const connection = upstream.connection;
  const named = connection ? connectionTokens(Array.isArray(connection) ? connection : [connection]) : null;
  const out: OutgoingHttpHeaders = {};
  for (const name in upstream) {
    const value = upstream[name];
    if (value === undefined || HOP_BY_HOP.has(name) || named?.has(name)) continue;
    out[name] = value;
  }
  out['x-request-id'] = requestId;
  return out;
}

const TE_TRAILERS = /(?:^|,)\s*trailers\s*(?:$|[,;])/i;

/**
 * Whether the client takes trailers: an h2 client always; an HTTP/1.1 one only after `TE: trailers` (RFC 9110
 * §6.5.1), and node sends them only in a chunked response.
 */
export function takesTrailers(req: IncomingMessage): boolean {
  if (isHttp2(req)) return true;
  const te = req.headers.te;
  return te !== undefined && TE_TRAILERS.test(String(te));
}

/** The upstream's trailers as the client may get them (a gRPC call's status is in them): never hop-by-hop or framing fields; null when none is left. */
export function trailerFields(upstream: IncomingHttpHeaders): OutgoingHttpHeaders | null {
  let out: OutgoingHttpHeaders | null = null;
  for (const name in upstream) {
    const value = upstream[name];
    if (value === undefined || HOP_BY_HOP.has(name) || name === 'content-length' || name === 'host') continue;
    (out ??= {})[name] = value;
  }
  return out;
}

/** A gRPC status as a Trailers-Only response carries it, in its headers. */
const GRPC_STATUS_FIELDS = ['grpc-status', 'grpc-message', 'grpc-status-details-bin'];

/**
 * A gRPC upstream's Trailers-Only answer (one HEADERS frame with END_STREAM, the status in it) cannot be relayed as
 * such: node's h2 response sends its head as soon as it is written, before the proxy knows that no body follows,
 * and a client reads a gRPC status only from the frame that ends the stream. So the status fields move from the
 * head to the trailers (the gRPC spec's other form of the same answer); null when the head has no status.
 */
export function takeGrpcStatus(head: OutgoingHttpHeaders): OutgoingHttpHeaders | null {
  if (head['grpc-status'] === undefined) return null;
  const status: OutgoingHttpHeaders = {};
  for (const name of GRPC_STATUS_FIELDS) {
    if (head[name] === undefined) continue;
    status[name] = head[name];
    delete head[name];
  }
  return status;
}
