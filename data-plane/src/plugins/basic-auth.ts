/**
 * basic_auth (config: proto/src/plugins/basic-auth.ts): the request passes when its
 * `Authorization: Basic …` names one of the snapshot's basic_auth users with the right password
 * (data-plane/src/auth/basic-credentials.ts); otherwise 401 `"invalid credentials"` with the
 * `WWW-Authenticate` challenge. A check not made because too many are pending is 503 with Retry-After:
 * the password was not looked at, so it is not rejected. The Authorization header is forwarded unchanged, as with oauth2, and the
 * username goes upstream as X-Consumer-Username (ex.consumer), as Kong's basic-auth sends it; acl judges the user's groups.
 */
import { GatehouseError } from '#proto/errors';
import { BUSY } from '../auth/basic-credentials.js';
import type { CompiledBasicAuth } from '#proto/plugins/index';
import type { PluginExchange } from './pipeline.js';
import type { PluginRuntime } from './runtime.js';

export const basicAuthRuntime: PluginRuntime<CompiledBasicAuth> = {
  stage: (config, { basicAuth, basicAuthGroups }) => {
    const refuse = (ex: PluginExchange): never => {
      ex.addClientHeader('www-authenticate', config.challenge);
      throw new GatehouseError('CREDENTIALS_REJECTED', 'invalid credentials');
    };
    return {
      // Synchronous while the verdict is cached (see basic-credentials.ts): no async frame per request.
      request(ex) {
        const verdict = basicAuth(ex.req.headers.authorization);
        if (typeof verdict === 'string') ex.authenticate(verdict, basicAuthGroups, true);
        else if (verdict === null) refuse(ex);
        else if (verdict === BUSY) {
          ex.addClientHeader('retry-after', '1');
          throw new GatehouseError('CREDENTIALS_CHECK_BUSY', 'credential check busy; retry later');
        } else
          return verdict.then((username) => {
            if (username === null) return refuse(ex);
            ex.authenticate(username, basicAuthGroups, true);
          });
        return;
      },
    };
  },
};
