/**
 * request_termination (config: proto/src/plugins/request-termination.ts): every request of the route is answered
 * with the configured status and body, and nothing goes upstream. The answer is made once per snapshot; the
 * headers earlier plugins add for the client (CORS, rate limit) go on it as on any answer of the gateway.
 */
import type { CompiledRequestTermination } from '#proto/plugins/index';
import type { PluginAnswer } from './pipeline.js';
import type { PluginRuntime } from './runtime.js';

export const requestTerminationRuntime: PluginRuntime<CompiledRequestTermination> = {
  stage: ({ status, contentType, body, message }) => {
    const answer: PluginAnswer = {
      status,
      headers: contentType === null ? {} : { 'content-type': contentType },
      body: Buffer.from(body),
      ...(message !== null && { message }),
    };
    return { request: () => answer };
  },
};
