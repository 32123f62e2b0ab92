/**
 * oauth2 (docs/oauth2.md "OAuth 2.0"): the snapshot's authorizer checks the bearer token (see data-plane/src/auth), then this
 * route's `scopes` are judged against the token's grant and its `claims_to_headers` sent upstream. Refusals carry the
 * RFC 6750 §3 challenge, realm the API's name (nameSchema's alphabet: safe in a quoted-string as is):
 *
 * | refusal                                              | WWW-Authenticate                                          |
 * |------------------------------------------------------|-----------------------------------------------------------|
 * | no Authorization, or another scheme (400)            | `Bearer realm="api"` (§3.1: no error code without bearer credentials) |
 * | Authorization not `Bearer <token>` (400)             | `Bearer realm="api", error="invalid_request"`             |
 * | token rejected (401)                                 | `Bearer realm="api", error="invalid_token"`               |
 * | a required scope missing (403 INSUFFICIENT_SCOPE)    | `Bearer realm="api", error="insufficient_scope", scope="a b"` |
 * | introspection unavailable (503)                      | none: the token was not judged                            |
 */
import { hash } from 'node:crypto';
import { GatehouseError, isGatehouseError } from '#proto/errors';
import type { CompiledHeaderEdits, CompiledOAuth2 } from '#proto/plugins/index';
import type { TokenGrant } from '../auth/index.js';
import { isPromise, type PluginExchange } from './pipeline.js';
import { editHeaderList } from './request-transformer.js';
import type { PluginRuntime } from './runtime.js';

export const oauth2Runtime: PluginRuntime<CompiledOAuth2> = {
  stage: (config, { route, authorizer }) => {
    const realm = `Bearer realm="${route.name}"`;
    const challenges: Partial<Record<string, string>> = {
      BEARER_MALFORMED: realm,
      TOKEN_REJECTED: `${realm}, error="invalid_token"`,
      INSUFFICIENT_SCOPE: `${realm}, error="insufficient_scope", scope="${config.scopes.join(' ')}"`,
    };
    // The client's own copies of the claim headers never reach the upstream, whatever the token holds.
    const removeClaimHeaders: CompiledHeaderEdits | null =
      config.claimHeaders.length > 0 ? { remove: new Set(config.claimHeaders.map(([, header]) => header)), replace: [], add: [], append: [] } : null;

    const refused = (ex: PluginExchange, err: unknown): never => {
      if (isGatehouseError(err)) {
        const challenge =
          err.code === 'AUTH_HEADER_MISSING'
            ? ex.req.headers.authorization === undefined
              ? realm
              : `${realm}, error="invalid_request"`
            : challenges[err.code];
        if (challenge !== undefined) ex.addClientHeader('www-authenticate', challenge);
      }
      throw err;
    };

    const admit = (ex: PluginExchange, grant: TokenGrant | undefined): void => {
      if (grant === undefined) return;
      for (const scope of config.scopes) {
        if (!grant.scopes.has(scope)) refused(ex, new GatehouseError('INSUFFICIENT_SCOPE', `token lacks scope ${scope}`));
      }
      // The token's subject, else (a token without `sub`) the token itself, hashed: each its own cache entries.
      const sub = grant.claims.get('sub');
      ex.identity =
        sub !== undefined
          ? `oauth2:${grant.claims.get('iss') ?? ''}\0${sub}`
          : `oauth2-token:${hash('sha256', ex.req.headers.authorization ?? '', 'base64url')}`;
      ex.personal = true;
      if (!removeClaimHeaders) return;
      const headers = editHeaderList(ex.headers, removeClaimHeaders);
      for (const [claim, header] of config.claimHeaders) {
        const value = grant.claims.get(claim);
        if (value !== undefined) headers.push(header, value);
      }
      ex.headers = headers;
    };

    return {
      request(ex) {
        let grant: ReturnType<typeof authorizer.check>;
        try {
          grant = authorizer.check(route, ex.req.headers.authorization);
        } catch (err) {
          return refused(ex, err);
        }
        if (!isPromise<TokenGrant>(grant)) return admit(ex, grant);
        return grant.then(
          (g) => admit(ex, g),
          (err: unknown) => refused(ex, err),
        );
      },
    };
  },
};
