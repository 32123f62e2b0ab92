/** oauth2 (README "OAuth 2.0"): the snapshot's authorizer checks the bearer token; see data-plane/src/auth. */
import type { CompiledOAuth2 } from '#proto/plugins/index';
import type { PluginRuntime } from './runtime.js';

export const oauth2Runtime: PluginRuntime<CompiledOAuth2> = {
  stage: (_config, { route, authorizer }) => ({
    request: (ex) => authorizer.check(route, ex.req.headers.authorization),
  }),
};
