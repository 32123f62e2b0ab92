/** response_transformer: headers of the upstream's response to the client (see header-transformer.ts). */
import { compileHeaderEdits, responseTransformerSchema } from './header-transformer.js';
import type { CompiledHeaderEdits } from './header-transformer.js';
import { deepFreeze, definePlugin } from './plugin.js';

export interface CompiledResponseTransformer {
  headers: CompiledHeaderEdits | null;
}

export const responseTransformerPlugin = definePlugin({
  schema: responseTransformerSchema,
  compile: (c): CompiledResponseTransformer => deepFreeze({ headers: compileHeaderEdits(c) }),
});
