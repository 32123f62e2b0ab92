/**
 * gRPC without a .proto for the gRPC suites: methods whose messages are raw bytes (for @grpc/grpc-js clients and
 * servers), and gRPC's message framing for clients and servers that speak it by hand.
 */
import type * as grpc from '@grpc/grpc-js';

const same = (b: Buffer): Buffer => b;

/** `/test.Echo/<name>`, its messages as raw bytes. */
export function rawMethod(name: string, requestStream: boolean, responseStream: boolean): grpc.MethodDefinition<Buffer, Buffer> {
  return {
    path: `/test.Echo/${name}`,
    requestStream,
    responseStream,
    requestSerialize: same,
    requestDeserialize: same,
    responseSerialize: same,
    responseDeserialize: same,
    originalName: name,
  };
}

/** A gRPC message frame: flag 0, length, bytes. */
export function frame(message: Buffer | string): Buffer {
  const bytes = Buffer.from(message);
  const head = Buffer.alloc(5);
  head.writeUInt32BE(bytes.length, 1);
  return Buffer.concat([head, bytes]);
}
