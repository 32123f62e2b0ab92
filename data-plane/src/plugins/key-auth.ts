/**
 * key_auth (config: proto/src/plugins/key-auth.ts): the request passes when it carries the API key
 * of one of the snapshot's key_auth credentials, in a header named by `key_names` (any case) or
 * else in a query parameter of such a name; the first non-empty one found is the key. No key →
 * 401 `"no API key found in request"` (KEY_MISSING); a key no credential holds → 401 `"invalid API
 * key"` (KEY_REJECTED); both with the `WWW-Authenticate: Key realm="…"` challenge, as Kong answers.
 *
 * On success the upstream gets `X-Consumer-Username: <credential's username>` (ex.consumer: the proxy
 * sets it, and drops any copy a client sent on every route, proxy/headers.ts), and acl judges the
 * credential's groups. With `hide_credentials` every header and query parameter named by `key_names` is dropped.
 */
import { MAX_API_KEY_LENGTH } from '#proto/api-key';
import { GatehouseError } from '#proto/errors';
import type { CompiledHeaderEdits, CompiledKeyAuth, CompiledQueryEdits } from '#proto/plugins/index';
import type { PluginExchange } from './pipeline.js';
import { decodeQueryComponent, editHeaderList, editQuery } from './request-transformer.js';
import type { PluginRuntime } from './runtime.js';

/** The first non-empty value of a header named in `names` (lower-case), in the order of `names`. */
function headerValue(raw: readonly string[], names: readonly string[]): string | undefined {
  for (const name of names) {
    for (let i = 0; i < raw.length; i += 2) {
      if (raw[i + 1] !== '' && raw[i]!.length === name.length && raw[i]!.toLowerCase() === name) return raw[i + 1]!.trim();
    }
  }
  return undefined;
}

/** The first non-empty value of a query parameter named in `names` (decoded, compared as written), in the order of `names`. */
function queryValue(query: string, names: readonly string[]): string | undefined {
  if (query === '' || names.length === 0) return undefined;
  const pairs = query.split('&');
  for (const name of names) {
    for (const pair of pairs) {
      const eq = pair.indexOf('=');
      if (eq <= 0 || eq === pair.length - 1 || decodeQueryComponent(pair.slice(0, eq)) !== name) continue;
      return decodeQueryComponent(pair.slice(eq + 1));
    }
  }
  return undefined;
}

const NO_EDITS = { replace: [], add: [], append: [] };

export const keyAuthRuntime: PluginRuntime<CompiledKeyAuth> = {
  stage: (config, { apiKeyOwner, keyAuthGroups }) => {
    const { headerNames, queryNames, hideCredentials, challenge } = config;
    const headerEdits: CompiledHeaderEdits | null = hideCredentials && headerNames.length > 0 ? { remove: new Set(headerNames), ...NO_EDITS } : null;
    const queryEdits: CompiledQueryEdits | null = hideCredentials && queryNames.length > 0 ? { remove: new Set(queryNames), ...NO_EDITS } : null;
    const refuse = (ex: PluginExchange, code: 'KEY_MISSING' | 'KEY_REJECTED'): never => {
      ex.addClientHeader('www-authenticate', challenge);
      throw new GatehouseError(code, code === 'KEY_MISSING' ? 'no API key found in request' : 'invalid API key');
    };
    return {
      request(ex) {
        const key = headerValue(ex.headers, headerNames) || queryValue(ex.query, queryNames);
        if (!key) return refuse(ex, 'KEY_MISSING');
        // No stored key is longer: such a key is refused without hashing it.
        const username = key.length <= MAX_API_KEY_LENGTH ? apiKeyOwner(key) : undefined;
        if (username === undefined) return refuse(ex, 'KEY_REJECTED');
        ex.authenticate(username, keyAuthGroups, false);
        if (headerEdits) ex.headers = editHeaderList(ex.headers, headerEdits);
        if (queryEdits && ex.query !== '') ex.query = editQuery(ex.query, queryEdits);
      },
    };
  },
};
