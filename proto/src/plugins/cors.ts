/**
 * cors: Janus's `domains`, `methods`, `request_headers`, `exposed_headers`, `options_passthrough`,
 * plus rs/cors's `allow_credentials` and `max_age` (seconds). Lists may be JSON arrays or Janus's
 * comma-delimited strings.
 *
 * A domain is `*` (any origin), an origin with its scheme (`https://app.example.com`, matched
 * against the whole Origin header) or a host without scheme (`app.example.com`, any scheme); either
 * may hold one `*` wildcard (`*.example.com` matches `a.example.com` and `x.y.example.com`, never
 * `example.com`). `allow_credentials` with a `*` domain is refused: the gateway never tells a
 * browser that any origin may send credentials.
 */
import { z } from 'zod';
import { HTTP_TOKEN } from '../definition/proxy-schema.js';
import { commaList, dedupeCaseInsensitive, headerNameSchema } from './http-syntax.js';
import { deepFreeze, definePlugin } from './plugin.js';

/** A domain pattern: `*`, or [scheme://]host[:port] with at most one `*`. */
const DOMAIN_PATTERN = /^(?:(https?):\/\/)?([a-z0-9*._\-[\]:]+)$/;

const domainSchema = z
  .string()
  .transform((s) => s.trim().toLowerCase())
  .refine(
    (s) => s === '*' || (DOMAIN_PATTERN.test(s) && (s.match(/\*/g)?.length ?? 0) <= 1),
    'must be "*", an origin such as "https://app.example.com" or a host pattern such as "*.example.com"',
  );

const methodSchema = z.string().regex(HTTP_TOKEN, 'is not a valid HTTP method');

const requestHeaderSchema = z.union([z.literal('*'), headerNameSchema]);

export const DEFAULT_CORS_METHODS = ['GET', 'POST', 'HEAD'];
export const DEFAULT_CORS_REQUEST_HEADERS = ['Origin', 'Accept', 'Content-Type', 'X-Requested-With'];

const schema = z
  .object({
    domains: commaList(domainSchema)
      .default(['*'])
      .transform((d) => [...new Set(d)]),
    methods: commaList(methodSchema)
      .default(DEFAULT_CORS_METHODS)
      .transform((m) => [...new Set(m.map((x) => x.toUpperCase()))]),
    request_headers: commaList(requestHeaderSchema).default(DEFAULT_CORS_REQUEST_HEADERS).transform(dedupeCaseInsensitive),
    exposed_headers: commaList(headerNameSchema).default([]).transform(dedupeCaseInsensitive),
    options_passthrough: z.boolean().default(false),
    allow_credentials: z.boolean().default(false),
    max_age: z.int({ error: 'must be an integer number of seconds' }).min(0, 'must be at least 0').max(86_400, 'must be at most 86400').default(0),
  })
  .superRefine((c, ctx) => {
    if (c.allow_credentials && c.domains.includes('*')) {
      ctx.addIssue({ code: 'custom', path: ['allow_credentials'], message: 'must be false when domains contains "*"' });
    }
  });

export type CorsConfig = z.output<typeof schema>;

/** `*.example.com` → prefix '' and suffix '.example.com'; the `*` stands for at least one character. */
interface Wildcard {
  prefix: string;
  suffix: string;
}

export interface CompiledCors {
  /** `*` listed: any origin, answered with `Access-Control-Allow-Origin: *` (never with credentials). */
  anyOrigin: boolean;
  /** Whole origins (`https://a.example.com`), lower-cased. */
  origins: ReadonlySet<string>;
  /** Hosts without scheme (`a.example.com`), lower-cased. */
  hosts: ReadonlySet<string>;
  originWildcards: readonly Wildcard[];
  hostWildcards: readonly Wildcard[];
  methods: ReadonlySet<string>;
  /** Value of Access-Control-Allow-Methods. */
  allowMethods: string;
  /** `*` listed in request_headers: any requested header is allowed. */
  anyHeader: boolean;
  /** Lower-cased allowed request headers. */
  requestHeaders: ReadonlySet<string>;
  /** Value of Access-Control-Expose-Headers, null when none. */
  exposeHeaders: string | null;
  credentials: boolean;
  /** Value of Access-Control-Max-Age, null when 0. */
  maxAge: string | null;
  optionsPassthrough: boolean;
}

function compile(c: CorsConfig): CompiledCors {
  const origins = new Set<string>();
  const hosts = new Set<string>();
  const originWildcards: Wildcard[] = [];
  const hostWildcards: Wildcard[] = [];
  for (const d of c.domains) {
    if (d === '*') continue;
    const withScheme = d.includes('://');
    const star = d.indexOf('*');
    if (star === -1) (withScheme ? origins : hosts).add(d);
    else (withScheme ? originWildcards : hostWildcards).push({ prefix: d.slice(0, star), suffix: d.slice(star + 1) });
  }
  const requestHeaders = c.request_headers.map((h) => h.toLowerCase());
  return deepFreeze({
    anyOrigin: c.domains.includes('*'),
    origins,
    hosts,
    originWildcards,
    hostWildcards,
    methods: new Set(c.methods),
    allowMethods: c.methods.join(', '),
    anyHeader: requestHeaders.includes('*'),
    requestHeaders: new Set(requestHeaders.filter((h) => h !== '*')),
    exposeHeaders: c.exposed_headers.length > 0 ? c.exposed_headers.join(', ') : null,
    credentials: c.allow_credentials,
    maxAge: c.max_age > 0 ? String(c.max_age) : null,
    optionsPassthrough: c.options_passthrough,
  });
}

function matchesWildcard(value: string, w: Wildcard): boolean {
  return value.length > w.prefix.length + w.suffix.length && value.startsWith(w.prefix) && value.endsWith(w.suffix);
}

/** True when the Origin header value is listed (by anything but `*`: that one is `anyOrigin`). */
export function originListed(cors: CompiledCors, origin: string): boolean {
  const o = origin.toLowerCase();
  if (cors.origins.has(o) || cors.originWildcards.some((w) => matchesWildcard(o, w))) return true;
  const sep = o.indexOf('://');
  if (sep === -1) return false;
  const host = o.slice(sep + 3);
  return cors.hosts.has(host) || cors.hostWildcards.some((w) => matchesWildcard(host, w));
}

export const corsPlugin = definePlugin({ schema, compile });
