/**
 * key_auth (Kong's key-auth): the API requires an API key of one of the global key_auth
 * credentials (admin `/credentials/key_auth`), in a header and/or a query parameter named by
 * `key_names`. `hide_credentials` takes the key off the request before it goes upstream; `realm`
 * names the 401's `WWW-Authenticate: Key realm="…"` challenge.
 */
import { z } from 'zod';
import { realmSchema } from './basic-auth.js';
import { headerNameSchema } from './http-syntax.js';
import { deepFreeze, definePlugin } from './plugin.js';

export const DEFAULT_KEY_NAMES = ['apikey'];

const schema = z
  .object({
    // Header names (compared case-insensitively) and query parameter names (as written): both must be HTTP tokens.
    key_names: z
      .array(headerNameSchema)
      .min(1, 'must not be empty')
      .max(16, 'must have at most 16 names')
      .default(DEFAULT_KEY_NAMES)
      .transform((names) => [...new Set(names)]),
    key_in_header: z.boolean().default(true),
    key_in_query: z.boolean().default(true),
    hide_credentials: z.boolean().default(false),
    realm: realmSchema,
  })
  .refine((c) => c.key_in_header || c.key_in_query, { message: 'must not be false when key_in_query is false too', path: ['key_in_header'] });

export interface CompiledKeyAuth {
  /** key_names lower-cased, in order (`[]` when key_in_header is false). */
  headerNames: readonly string[];
  /** key_names as written, in order (`[]` when key_in_query is false). */
  queryNames: readonly string[];
  hideCredentials: boolean;
  /** Value of WWW-Authenticate on a 401. */
  challenge: string;
}

export const keyAuthPlugin = definePlugin({
  schema,
  compile: (c): CompiledKeyAuth =>
    deepFreeze({
      headerNames: c.key_in_header ? [...new Set(c.key_names.map((n) => n.toLowerCase()))] : [],
      queryNames: c.key_in_query ? c.key_names : [],
      hideCredentials: c.hide_credentials,
      challenge: `Key realm="${c.realm}"`,
    }),
});
