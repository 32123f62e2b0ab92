/**
 * gRPC's health checking protocol (grpc/grpc doc/health-checking.md), for `active.grpc` checks: a unary call of
 * `/grpc.health.v1.Health/Check` whose request and answer are one-field protobuf messages, encoded here by hand
 * (a .proto and a protobuf library for two fields would be most of the work):
 *
 *   message HealthCheckRequest  { string service = 1; }
 *   message HealthCheckResponse { enum ServingStatus { UNKNOWN = 0; SERVING = 1; NOT_SERVING = 2; SERVICE_UNKNOWN = 3; }
 *                                 ServingStatus status = 1; }
 */
export const HEALTH_CHECK_PATH = '/grpc.health.v1.Health/Check';

const SERVING_STATUS = ['UNKNOWN', 'SERVING', 'NOT_SERVING', 'SERVICE_UNKNOWN'];

/** The request for `service` in its gRPC frame (flag 0, length, message). */
export function healthCheckRequest(service: string): Buffer {
  const name = Buffer.from(service);
  // Field 1, wire type 2 (length-delimited); an empty string is not written (proto3's default).
  const message = name.length === 0 ? Buffer.alloc(0) : Buffer.concat([Buffer.from([0x0a]), varint(name.length), name]);
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  message.copy(frame, 5);
  return frame;
}

function varint(n: number): Buffer {
  const bytes: number[] = [];
  for (; n > 0x7f; n >>>= 7) bytes.push((n & 0x7f) | 0x80);
  bytes.push(n);
  return Buffer.from(bytes);
}

/** Reads a varint at `at`: its value and the offset after it; null when the bytes end first. */
function readVarint(bytes: Buffer, at: number): { value: number; next: number } | null {
  let value = 0;
  for (let shift = 0; at < bytes.length && shift < 35; shift += 7) {
    const byte = bytes[at++]!;
    value += (byte & 0x7f) * 2 ** shift;
    if ((byte & 0x80) === 0) return { value, next: at };
  }
  return null;
}

/**
 * The serving status the answer's body (its gRPC frames) names, as its enum name; UNKNOWN when the message
 * leaves it out (proto3's default). Throws on a body that is not one uncompressed frame of a well-formed message.
 */
export function servingStatus(body: Buffer): string {
  if (body.length < 5 || body[0] !== 0) throw new Error('not one uncompressed gRPC message');
  const length = body.readUInt32BE(1);
  if (body.length !== 5 + length) throw new Error('not one uncompressed gRPC message');
  let status = 0;
  for (let at = 5; at < body.length; ) {
    const tag = readVarint(body, at);
    if (!tag) throw new Error('malformed HealthCheckResponse');
    at = tag.next;
    const wireType = tag.value & 7;
    if (wireType === 0) {
      const value = readVarint(body, at);
      if (!value) throw new Error('malformed HealthCheckResponse');
      if (tag.value >>> 3 === 1) status = value.value;
      at = value.next;
    } else if (wireType === 2) {
      // An unknown length-delimited field (a newer server's): skipped.
      const length = readVarint(body, at);
      if (!length) throw new Error('malformed HealthCheckResponse');
      at = length.next + length.value;
    } else throw new Error('malformed HealthCheckResponse');
  }
  return SERVING_STATUS[status] ?? `status ${status}`;
}
