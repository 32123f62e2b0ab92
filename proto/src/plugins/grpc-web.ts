/**
 * grpc_web: gRPC-Web clients (browsers) served by a gRPC upstream, the translation Envoy's grpc_web filter
 * makes (data-plane/src/plugins/grpc-web.ts has the table). No options: a gRPC-Web request is told by its
 * Content-Type, and anything else on the route is proxied untouched. The upstream must speak HTTP/2
 * (`proxy.upstreams.protocol: "http2"`, checked when the API is compiled).
 */
import { z } from 'zod';
import { definePlugin } from './plugin.js';

const schema = z.object({});

export type GrpcWebConfig = z.output<typeof schema>;

const COMPILED: Readonly<GrpcWebConfig> = Object.freeze({});

export const grpcWebPlugin = definePlugin({
  schema,
  compile: (): Readonly<GrpcWebConfig> => COMPILED,
});
