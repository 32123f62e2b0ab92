/**
 * The introspection strategy's settings compiled once per snapshot into what one RFC 7662 call
 * needs: target origins and paths, the fixed headers (client_secret_basic already encoded), the
 * form's fixed fields, timeouts in milliseconds, and a cache key that changes with any of them (a
 * verdict obtained under other settings is never reused). Pure.
 */
import { createHash } from 'node:crypto';
import { parseDuration } from '../duration.js';
import type { IntrospectionSettings, IntrospectionTokenStrategy, ProxyDefinition } from '../definition/types.js';

export interface IntrospectionTarget {
  origin: string;
  /** Path plus query. */
  path: string;
}

export interface CompiledIntrospection {
  serverName: string;
  /** `oauth_endpoints.introspect`'s targets, tried round-robin. */
  targets: readonly IntrospectionTarget[];
  dialTimeoutMs: number;
  insecureSkipVerify: boolean;
  /** Bounds one whole call: connect, headers and body. */
  timeoutMs: number;
  /** Seconds an active result is reused at most (0: never). */
  cacheTtl: number;
  /** Seconds of clock skew tolerated on the response's exp. */
  leeway: number;
  /** The response's `iss` must be exactly this; undefined: not checked. */
  issuer?: string;
  /** The response's `aud` must hold one of these; undefined: not checked. */
  audiences?: readonly string[];
  headers: Readonly<Record<string, string>>;
  /** The token goes in `Authorization: <scheme> <token>` (Janus's use_auth_header), not in the form. */
  authScheme: string | null;
  /** Encoded form fields sent after the token's (`&token_type_hint=...&client_id=...`), or ''. */
  formTail: string;
  cacheKey: string;
}

/** RFC 6749 §2.3.1: client id and secret are form-urlencoded before they are joined and base64-encoded. */
function formEncode(value: string): string {
  return encodeURIComponent(value).replace(/%20/g, '+');
}

export function compileIntrospection(
  serverName: string,
  endpoint: ProxyDefinition,
  s: IntrospectionSettings,
  strategy: Pick<IntrospectionTokenStrategy, 'leeway' | 'issuer' | 'audiences'>,
): CompiledIntrospection {
  const targets = endpoint.upstreams.targets.map((t) => {
    const url = new URL(t.target);
    return { origin: url.origin, path: `${url.pathname || '/'}${url.search}` };
  });
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' };
  const tail: string[] = [];
  if (s.token_type_hint !== undefined) tail.push(`token_type_hint=${formEncode(s.token_type_hint)}`);
  if (s.client_id !== undefined) {
    if (s.client_auth === 'basic') {
      const pair = `${formEncode(s.client_id)}:${formEncode(s.client_secret ?? '')}`;
      headers.authorization = `Basic ${Buffer.from(pair).toString('base64')}`;
    } else {
      tail.push(`client_id=${formEncode(s.client_id)}`);
      if (s.client_secret !== undefined) tail.push(`client_secret=${formEncode(s.client_secret)}`);
    }
  }
  const compiled = {
    serverName,
    targets,
    dialTimeoutMs: parseDuration(endpoint.forwarding_timeouts.dial_timeout),
    insecureSkipVerify: endpoint.insecure_skip_verify,
    timeoutMs: parseDuration(s.timeout),
    cacheTtl: s.cache_ttl,
    leeway: strategy.leeway,
    // In the cache key with everything else: a verdict made under another issuer or audience list is never reused.
    ...(strategy.issuer !== undefined && { issuer: strategy.issuer }),
    ...(strategy.audiences !== undefined && { audiences: Object.freeze([...strategy.audiences]) }),
    headers,
    authScheme: s.use_auth_header ? s.auth_header_type : null,
    formTail: tail.map((f) => `&${f}`).join(''),
  };
  const cacheKey = createHash('sha256').update(JSON.stringify(compiled)).digest('base64url');
  return Object.freeze({ ...compiled, targets: Object.freeze(targets), headers: Object.freeze(headers), cacheKey });
}
