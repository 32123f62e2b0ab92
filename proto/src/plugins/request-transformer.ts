/** request_transformer: headers and query string of the upstream request (see header-transformer.ts). */
import { compileHeaderEdits, compileQueryEdits, requestTransformerSchema } from './header-transformer.js';
import type { CompiledHeaderEdits, CompiledQueryEdits } from './header-transformer.js';
import { deepFreeze, definePlugin } from './plugin.js';

export interface CompiledRequestTransformer {
  headers: CompiledHeaderEdits | null;
  query: CompiledQueryEdits | null;
}

export const requestTransformerPlugin = definePlugin({
  schema: requestTransformerSchema,
  compile: (c): CompiledRequestTransformer => deepFreeze({ headers: compileHeaderEdits(c), query: compileQueryEdits(c) }),
});
