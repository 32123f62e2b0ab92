/** The runtime side of a plugin: once per route and snapshot, its hooks closed over its compiled config. */
import type { CompiledRoute } from '#proto/compile/index';
import type { Authorizer } from '../auth/index.js';
import type { PluginStage } from './pipeline.js';

/** What a stage may use besides its config: per snapshot, never per request. */
export interface StageDeps {
  route: CompiledRoute;
  authorizer: Authorizer;
}

export interface PluginRuntime<Compiled> {
  stage(config: Compiled, deps: StageDeps): PluginStage;
}
