/**
 * request_mirror: traffic shadowing (Envoy's request_mirror_policies, the Gateway API's RequestMirror filter). A
 * copy of each sampled request goes to `target`, an origin (`http(s)://host[:port]`, no path, query or
 * placeholder: the copy carries the primary's rewritten path and query); its answer is discarded.
 * `percentage` (0–100, fractions allowed, 100 by default) of requests are copied. Stored with the origin
 * normalised (`HTTP://Orders:80` → `http://orders`).
 */
import { z } from 'zod';
import { compileTarget } from '../compile/target.js';
import { isGatehouseError } from '../errors.js';
import { deepFreeze, definePlugin } from './plugin.js';

/** The origin of a target URL, or the reason it is none. */
function originOf(target: string): { origin: string; host: string } | string {
  if (/[{}]/.test(target)) return 'must not contain placeholders (the mirror target is one fixed origin)';
  try {
    const resolved = compileTarget(target, [], '').resolved!;
    if (resolved.path !== '/' || resolved.query !== '' || /#/.test(target))
      return 'must be an origin such as "http://orders-v2:8080" (no path, query or fragment)';
    return resolved;
  } catch (err) {
    if (isGatehouseError(err)) return err.message;
    throw err;
  }
}

const schema = z.object({
  target: z
    .string({ error: 'is required' })
    .max(2048, 'is too long')
    .transform((s, ctx) => {
      const origin = originOf(s);
      if (typeof origin === 'object') return origin.origin;
      ctx.addIssue({ code: 'custom', message: origin });
      return z.NEVER;
    }),
  percentage: z.number({ error: 'must be a number from 0 to 100' }).min(0, 'must be at least 0').max(100, 'must be at most 100').default(100),
});

export interface CompiledRequestMirror {
  /** `http(s)://host[:port]`: the pool key. */
  origin: string;
  /** Share of requests copied, 0–100. */
  percentage: number;
}

export const requestMirrorPlugin = definePlugin({
  schema,
  compile: (c): CompiledRequestMirror => deepFreeze({ origin: c.target, percentage: c.percentage }),
});
