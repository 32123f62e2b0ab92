/**
 * The runtime registry: one line per plugin of proto/src/plugins/index.ts. Its type requires an
 * entry for every plugin name there, so a plugin without a runtime fails to type-check.
 * `buildPipeline` runs once per route and snapshot (table/build.ts).
 */
import type { CompiledRoute } from '#proto/compile/index';
import type { CompiledPluginConfig, PluginName } from '#proto/plugins/index';
import { aclRuntime } from './acl.js';
import { basicAuthRuntime } from './basic-auth.js';
import { bodyLimitRuntime } from './body-limit.js';
import { cbRuntime } from './cb.js';
import { compressionRuntime } from './compression.js';
import { grpcWebRuntime } from './grpc-web.js';
import { corsRuntime } from './cors.js';
import { credentialFieldsStage } from './credential-fields.js';
import { ipRestrictionRuntime } from './ip-restriction.js';
import { keyAuthRuntime } from './key-auth.js';
import { oauth2Runtime } from './oauth2.js';
import { openidConnectRuntime } from './openid-connect.js';
import { pipelineOf, type Pipeline, type PluginStage } from './pipeline.js';
import { proxyCacheRuntime } from './proxy-cache/index.js';
import { redirectRuntime } from './redirect.js';
import { rateLimitRuntime } from './rate-limit/index.js';
import { requestMirrorRuntime } from './request-mirror.js';
import { requestTerminationRuntime } from './request-termination.js';
import { requestTransformerRuntime } from './request-transformer.js';
import { requestValidatorRuntime } from './request-validator.js';
import { responseTransformerRuntime } from './response-transformer.js';
import { retryRuntime } from './retry.js';
import type { PluginRuntime, StageDeps } from './runtime.js';

export const RUNTIMES: { readonly [N in PluginName]: PluginRuntime<CompiledPluginConfig<N>> } = {
  cors: corsRuntime,
  ip_restriction: ipRestrictionRuntime,
  rate_limit: rateLimitRuntime,
  oauth2: oauth2Runtime,
  basic_auth: basicAuthRuntime,
  key_auth: keyAuthRuntime,
  openid_connect: openidConnectRuntime,
  acl: aclRuntime,
  body_limit: bodyLimitRuntime,
  request_termination: requestTerminationRuntime,
  redirect: redirectRuntime,
  request_validator: requestValidatorRuntime,
  grpc_web: grpcWebRuntime,
  request_transformer: requestTransformerRuntime,
  request_mirror: requestMirrorRuntime,
  retry: retryRuntime,
  cb: cbRuntime,
  response_transformer: responseTransformerRuntime,
  compression: compressionRuntime,
  proxy_cache: proxyCacheRuntime,
};

/**
 * The route's pipeline, or null when it has no enabled plugin (the proxy then allocates nothing).
 * `innermost`: a stage of the gateway's own, run after the plugins' (the passive health check).
 */
export function buildPipeline(route: CompiledRoute, deps: Omit<StageDeps, 'route'>, innermost?: PluginStage): Pipeline | null {
  if (route.plugins.length === 0 && !innermost) return null;
  const stages = route.plugins.map((p) => (RUNTIMES[p.name] as PluginRuntime<unknown>).stage(p.config, { ...deps, route }));
  // Before any plugin: a request with two Authorization headers (or two of another credential field) is refused.
  const guard = credentialFieldsStage(route);
  if (guard) stages.unshift(guard);
  return pipelineOf(innermost ? [...stages, innermost] : stages);
}

export {
  isPromise,
  PluginExchange,
  runRequestHooks,
  type AttemptStarted,
  type ForwardHook,
  type ForwardNext,
  type Pipeline,
  type PluginAnswer,
  type PluginStage,
  type UpstreamOutcome,
} from './pipeline.js';
export type { PluginRuntime, StageDeps } from './runtime.js';
export { MirrorCopy, MIRROR_BODY_BYTES, type CopyFailure } from './request-mirror.js';
export { createResponseCache, type ResponseCache } from './proxy-cache/index.js';
