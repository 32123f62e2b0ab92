import { healthCheckRequest, servingStatus } from './grpc-health.js';

const frame = (message: number[]) => Buffer.from([0, 0, 0, 0, message.length, ...message]);

test('the request frames HealthCheckRequest{service}; "" is the empty message', () => {
  expect(healthCheckRequest('')).toEqual(Buffer.from([0, 0, 0, 0, 0]));
  expect(healthCheckRequest('a.B')).toEqual(Buffer.from([0, 0, 0, 0, 5, 0x0a, 3, 0x61, 0x2e, 0x42]));
  // A name of 200 bytes: its length is a two-byte varint.
  const long = healthCheckRequest('x'.repeat(200));
  expect([...long.subarray(0, 8)]).toEqual([0, 0, 0, 0, 203, 0x0a, 0xc8, 0x01]);
});

test.each([
  [[0x08, 1], 'SERVING'],
  [[0x08, 2], 'NOT_SERVING'],
  [[0x08, 3], 'SERVICE_UNKNOWN'],
  [[], 'UNKNOWN'],
  [[0x08, 9], 'status 9'],
  // A newer server's unknown fields are skipped: a string field 2, a varint field 3.
  [[0x12, 2, 0x61, 0x62, 0x08, 1, 0x18, 0x96, 0x01], 'SERVING'],
])('the answer %j names %s', (message, status) => {
  expect(servingStatus(frame(message))).toBe(status);
});

test.each([
  ['nothing', Buffer.alloc(0)],
  ['a compressed frame', Buffer.from([1, 0, 0, 0, 2, 0x08, 1])],
  ['a frame longer than the body', Buffer.from([0, 0, 0, 0, 9, 0x08, 1])],
  ['two frames', Buffer.concat([frame([0x08, 1]), frame([0x08, 1])])],
  ['a truncated varint', frame([0x08, 0x80])],
  ['a fixed64 field', frame([0x09, 1, 2, 3, 4, 5, 6, 7, 8])],
])('%s is refused', (_name, body) => {
  expect(() => servingStatus(body)).toThrow();
});
