/**
 * basic_auth: the API requires `Authorization: Basic <base64(user:password)>` of one of the
 * global basic_auth users (admin `/credentials/basic_auth`), as Janus's plugin does; its config is
 * empty in Janus. One addition: `realm`, the name the 401's `WWW-Authenticate` challenge shows.
 */
import { z } from 'zod';
import { deepFreeze, definePlugin } from './plugin.js';

export const DEFAULT_BASIC_AUTH_REALM = 'Restricted';

/** A challenge's realm: a quoted-string of RFC 7235 without escapes (printable ASCII except `"` and `\`). Also key_auth's. */
export const realmSchema = z
  .string()
  .min(1, 'must not be empty')
  .max(128, 'must be at most 128 characters')
  .regex(/^[\x20-\x21\x23-\x5b\x5d-\x7e]+$/, 'must be printable ASCII without " or \\')
  .default(DEFAULT_BASIC_AUTH_REALM);

const schema = z.object({ realm: realmSchema });

export interface CompiledBasicAuth {
  /** Value of WWW-Authenticate on a 401. */
  challenge: string;
}

export const basicAuthPlugin = definePlugin({
  schema,
  compile: (c): CompiledBasicAuth => deepFreeze({ challenge: `Basic realm="${c.realm}", charset="UTF-8"` }),
});
