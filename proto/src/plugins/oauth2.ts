/**
 * oauth2: the API requires a bearer token valid for the named OAuth server (README "OAuth 2.0"). That the
 * server exists is checked by compileDefinitions, which sees the whole configuration.
 */
import { z } from 'zod';
import { deepFreeze, definePlugin } from './plugin.js';

const schema = z.object({ server_name: z.string().min(1, 'is required') });

export interface CompiledOAuth2 {
  serverName: string;
}

export const oauth2Plugin = definePlugin({
  schema,
  compile: (c): CompiledOAuth2 => deepFreeze({ serverName: c.server_name }),
});
