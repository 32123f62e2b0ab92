/**
 * basic_auth (config: proto/src/plugins/basic-auth.ts): the request passes when its
 * `Authorization: Basic …` names one of the snapshot's basic_auth users with the right password
 * (data-plane/src/auth/basic-credentials.ts); otherwise 401 `"invalid credentials"` with the
 * `WWW-Authenticate` challenge. The Authorization header is forwarded unchanged, as with oauth2.
 */
import { GatehouseError } from '#proto/errors';
import type { CompiledBasicAuth } from '#proto/plugins/index';
import type { PluginRuntime } from './runtime.js';

export const basicAuthRuntime: PluginRuntime<CompiledBasicAuth> = {
  stage: (config, { basicAuth }) => ({
    async request(ex) {
      if (await basicAuth(ex.req.headers.authorization)) return;
      ex.addClientHeader('www-authenticate', config.challenge);
      throw new GatehouseError('CREDENTIALS_REJECTED', 'invalid credentials');
    },
  }),
};
