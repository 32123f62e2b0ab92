/**
 * The plugin registry: one line per plugin, in execution order (the data plane runs a route's
 * enabled plugins in this order, whatever order the definition lists them in; see the table in
 * data-plane/src/plugins/pipeline.ts). Adding a plugin: a module here (schema + compile), a message
 * in gatehouse.proto's `Plugin.config` oneof, a runtime in data-plane/src/plugins/ and its line in
 * that registry (the data plane fails to type-check until it has one).
 */
import type { z } from 'zod';
import { check } from '../definition/field-path.js';
import { aclPlugin } from './acl.js';
import { basicAuthPlugin } from './basic-auth.js';
import { bodyLimitPlugin } from './body-limit.js';
import { cbPlugin } from './cb.js';
import { grpcWebPlugin } from './grpc-web.js';
import { compressionPlugin } from './compression.js';
import { corsPlugin } from './cors.js';
import { ipRestrictionPlugin } from './ip-restriction.js';
import { keyAuthPlugin } from './key-auth.js';
import { oauth2Plugin } from './oauth2.js';
import { openidConnectPlugin } from './openid-connect.js';
import type { PluginModule } from './plugin.js';
import { proxyCachePlugin } from './proxy-cache.js';
import { redirectPlugin } from './redirect.js';
import { rateLimitPlugin } from './rate-limit.js';
import { requestMirrorPlugin } from './request-mirror.js';
import { requestTerminationPlugin } from './request-termination.js';
import { requestTransformerPlugin } from './request-transformer.js';
import { requestValidatorPlugin } from './request-validator.js';
import { responseTransformerPlugin } from './response-transformer.js';
import { retryPlugin } from './retry.js';

export const PLUGINS = {
  cors: corsPlugin,
  ip_restriction: ipRestrictionPlugin,
  rate_limit: rateLimitPlugin,
  oauth2: oauth2Plugin,
  basic_auth: basicAuthPlugin,
  key_auth: keyAuthPlugin,
  openid_connect: openidConnectPlugin,
  // authorization: judges the consumer basic_auth or key_auth found
  acl: aclPlugin,
  body_limit: bodyLimitPlugin,
  // answer without the upstream, as Kong's request-termination: after authentication, so a terminated or moved
  // API still asks for its credentials, and before proxy_cache, so no stored response outlives the termination
  request_termination: requestTerminationPlugin,
  redirect: redirectPlugin,
  // after body_limit and the answers that need no body (a terminated or moved API refuses nothing for its body);
  // it skips gRPC and gRPC-Web calls, so grpc_web's rewrite may follow
  request_validator: requestValidatorPlugin,
  // before request_transformer, which then sees the request as the gRPC upstream will
  grpc_web: grpcWebPlugin,
  request_transformer: requestTransformerPlugin,
  // with the forward stage, after request_transformer: the copy carries what the upstream gets
  request_mirror: requestMirrorPlugin,
  // retry and cb wrap the upstream exchange (retry outermost: each try asks the breaker)
  retry: retryPlugin,
  cb: cbPlugin,
  response_transformer: responseTransformerPlugin,
  compression: compressionPlugin,
  // last: its request hook runs after authentication and admission, its response hook sees the final response
  proxy_cache: proxyCachePlugin,
} as const satisfies Record<string, { schema: z.ZodType; compile(config: never): unknown }>;

export type PluginName = keyof typeof PLUGINS;

/** Registry order = execution order. */
export const PLUGIN_ORDER = Object.keys(PLUGINS) as PluginName[];

export type PluginConfig<N extends PluginName> = z.output<(typeof PLUGINS)[N]['schema']>;
export type CompiledPluginConfig<N extends PluginName> = ReturnType<(typeof PLUGINS)[N]['compile']>;

/** A plugin as stored: normalised config, defaults filled. */
export type PluginDefinitionOf<N extends PluginName> = { name: N; enabled: boolean; config: PluginConfig<N> };
export type PluginDefinition = { [N in PluginName]: PluginDefinitionOf<N> }[PluginName];

/** An enabled plugin as the data plane runs it. */
export type CompiledPlugin = { [N in PluginName]: { readonly name: N; readonly config: CompiledPluginConfig<N> } }[PluginName];

export function isPluginName(name: string): name is PluginName {
  return Object.hasOwn(PLUGINS, name);
}

/** Validates `raw` with the plugin's schema; a failure names the field under `base` (`plugins[1].config...`). */
export function parsePluginConfig<N extends PluginName>(name: N, raw: unknown, base: readonly PropertyKey[]): PluginDefinitionOf<N>['config'] {
  const result = check(PLUGINS[name].schema as z.ZodType, raw, base);
  if (!result.ok) throw result.error;
  return result.data as PluginConfig<N>;
}

/** One frozen empty list for every route without enabled plugins (most of them; a data plane holds every route). */
const NONE: readonly CompiledPlugin[] = Object.freeze([]);

/** The enabled plugins of a definition, compiled, in execution order. A disabled plugin is left out. */
export function compilePlugins(plugins: readonly PluginDefinition[]): readonly CompiledPlugin[] {
  const enabled = plugins.filter((p) => p.enabled);
  if (enabled.length === 0) return NONE;
  const rank = (p: PluginDefinition) => PLUGIN_ORDER.indexOf(p.name);
  return Object.freeze(
    [...enabled]
      .sort((a, b) => rank(a) - rank(b))
      .map((p) => Object.freeze({ name: p.name, config: (PLUGINS[p.name] as PluginModule<unknown, unknown>).compile(p.config) }) as CompiledPlugin),
  );
}

export type { CompiledCors } from './cors.js';
export { originListed } from './cors.js';
export type { CompiledRateLimit } from './rate-limit.js';
export type { CompiledIpRestriction } from './ip-restriction.js';
export type { CompiledOAuth2 } from './oauth2.js';
export type { CompiledBasicAuth } from './basic-auth.js';
export type { CompiledKeyAuth } from './key-auth.js';
export type { CompiledOpenidConnect } from './openid-connect.js';
export type { CompiledAcl } from './acl.js';
export type { CompiledBodyLimit } from './body-limit.js';
export { parseSize } from './body-limit.js';
export type { CompiledRequestTransformer } from './request-transformer.js';
export type { CompiledResponseTransformer } from './response-transformer.js';
export type { CompiledHeaderEdits, CompiledQueryEdits, HeaderEntry, QueryEntry } from './header-transformer.js';
export { HOP_BY_HOP_HEADERS } from './http-syntax.js';
export type { CompiledCompression, CompressionEncoding } from './compression.js';
export { mediaTypeListed } from './compression.js';
export type { CompiledRetry } from './retry.js';
export type { CompiledProxyCache } from './proxy-cache.js';
export { MAX_TTL_MS as MAX_PROXY_CACHE_TTL_MS } from './proxy-cache.js';
export type { MediaRanges } from './compression.js';
export type { CompiledCb } from './cb.js';
export type { CompiledRequestTermination } from './request-termination.js';
export type { CompiledRedirect } from './redirect.js';
export type { CompiledRequestMirror } from './request-mirror.js';
export type { CompiledRequestValidator } from './request-validator.js';
export { NO_GRPC_STATUS } from './status-predicate.js';
