/**
 * redirect: the Gateway API's HTTPRequestRedirectFilter (Envoy's RequestRedirect) for a route; the gateway answers
 * `status_code` (301, 302, 303, 307 or 308; 302 by default) with a Location and never asks the upstream.
 *
 * | part   | set                                            | unset                                            |
 * |--------|------------------------------------------------|--------------------------------------------------|
 * | scheme | `http` or `https`                              | the listener's                                   |
 * | host   | a host name or IP literal                      | the request's Host (a 400 when it is not a host) |
 * | port   | 1–65535                                        | the scheme's own when `scheme` is set, else the  |
 * |        |                                                | request's Host port                              |
 * | path   | the whole path (Gateway API ReplaceFullPath);  | the request's path                               |
 * |        | with `strip_path`, what replaces the matched   |                                                  |
 * |        | listen_path (ReplacePrefixMatch)               |                                                  |
 *
 * The query is always the request's. A port that is the scheme's own is left out of the Location. At least one
 * of scheme, host, port or path is set: a redirect to the very URL asked for would loop.
 */
import { z } from 'zod';
import { LOCATION_HOST } from '../location.js';
import { deepFreeze, definePlugin } from './plugin.js';

/** A path for a Location: `/` then RFC 3986 pchars and `/` (percent-encoded where needed, no query or fragment). */
const PATH = /^\/(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-Fa-f]{2})*$/;

const schema = z
  .object({
    status_code: z
      .union([z.literal(301), z.literal(302), z.literal(303), z.literal(307), z.literal(308)], { error: 'must be 301, 302, 303, 307 or 308' })
      .default(302),
    scheme: z
      .string()
      .transform((s) => s.toLowerCase())
      .pipe(z.enum(['http', 'https'], { error: 'must be "http" or "https"' }))
      .optional(),
    host: z
      .string()
      .max(253, 'is too long')
      .regex(LOCATION_HOST, 'must be a host name or an IP address ("[2001:db8::1]" for IPv6), without a port')
      .transform((s) => s.toLowerCase())
      .optional(),
    port: z.int({ error: 'must be an integer port' }).min(1, 'must be at least 1').max(65_535, 'must be at most 65535').optional(),
    path: z.string().max(1024, 'is too long').regex(PATH, 'must be a path starting with "/" (percent-encoded, without ? or #)').optional(),
    strip_path: z.boolean().default(false),
  })
  .superRefine((c, ctx) => {
    if (c.strip_path && c.path === undefined) ctx.addIssue({ code: 'custom', path: ['path'], message: 'is required with strip_path' });
    else if (c.scheme === undefined && c.host === undefined && c.port === undefined && c.path === undefined) {
      ctx.addIssue({ code: 'custom', path: [], message: 'must set at least one of scheme, host, port or path (a redirect to the same URL loops)' });
    }
  });

export type RedirectConfig = z.output<typeof schema>;

export interface CompiledRedirect {
  status: 301 | 302 | 303 | 307 | 308;
  /** null: the listener's. */
  scheme: 'http' | 'https' | null;
  /** null: the request's Host. */
  host: string | null;
  /** null: see the table. */
  port: number | null;
  /** null: the request's path. */
  path: string | null;
  /** `path` replaces the matched listen_path only (ReplacePrefixMatch). */
  prefix: boolean;
}

export const redirectPlugin = definePlugin({
  schema,
  compile: (c): CompiledRedirect =>
    deepFreeze({ status: c.status_code, scheme: c.scheme ?? null, host: c.host ?? null, port: c.port ?? null, path: c.path ?? null, prefix: c.strip_path }),
});
