import { randomBytes } from 'node:crypto';
import type { Transform } from 'node:stream';
import { Base64Decoder, GrpcWebBody, grpcWebMode, trailerFrame } from './grpc-web.js';

/** Writes `chunks` one by one, returns everything the transform put out. */
async function through(transform: Transform, chunks: (Buffer | string)[]): Promise<Buffer> {
  const out: Buffer[] = [];
  transform.on('data', (c: Buffer | string) => out.push(Buffer.from(c)));
  const done = new Promise<void>((resolve, reject) => {
    transform.on('end', resolve);
    transform.on('error', reject);
  });
  for (const chunk of chunks) transform.write(chunk);
  transform.end();
  await done;
  return Buffer.concat(out);
}

/** `bytes` cut at random places (seeded by the byte values themselves, so a failure replays). */
function cut(bytes: Buffer): Buffer[] {
  const pieces: Buffer[] = [];
  for (let at = 0; at < bytes.length; ) {
    const size = 1 + (bytes[at]! % 7);
    pieces.push(bytes.subarray(at, at + size));
    at += size;
  }
  return pieces;
}

test('the mode follows the Content-Type; gRPC and other types are not gRPC-Web', () => {
  expect(grpcWebMode('application/grpc-web')).toEqual({ text: false, rest: '' });
  expect(grpcWebMode('application/grpc-web+proto')).toEqual({ text: false, rest: '+proto' });
  expect(grpcWebMode('Application/GRPC-Web-Text+proto; charset=utf-8')).toEqual({ text: true, rest: '+proto; charset=utf-8' });
  for (const other of [undefined, 'application/grpc', 'application/grpc+proto', 'application/grpc-webby', 'text/plain']) expect(grpcWebMode(other)).toBeNull();
});

test('text mode: the body in base64 whatever its chunks, then the trailers frame in the same base64 stream', async () => {
  const body = randomBytes(1000);
  const trailers = { 'grpc-status': '0', 'x-list': ['a', 'b'] };
  const transform = new GrpcWebBody(true);
  transform.trailers = trailers;
  const text = (await through(transform, cut(body))).toString();
  // One stream: padding only at its very end.
  expect(text.slice(0, -2)).not.toContain('=');
  expect(Buffer.from(text, 'base64')).toEqual(Buffer.concat([body, trailerFrame(trailers)]));
});

test('binary mode: the body as it came, then the trailers frame; none when there are no trailers', async () => {
  const body = randomBytes(300);
  const transform = new GrpcWebBody(false);
  transform.trailers = { 'grpc-status': '7', 'grpc-message': 'denied' };
  expect(await through(transform, cut(body))).toEqual(
    Buffer.concat([body, Buffer.from([0x80, 0, 0, 0, 36]), Buffer.from('grpc-status:7\r\ngrpc-message:denied\r\n')]),
  );
  expect(await through(new GrpcWebBody(false), [body])).toEqual(body);
});

test('the request decoder reads base64 in any chunks, padded segments one after another included', async () => {
  const parts = [randomBytes(7), randomBytes(1), randomBytes(32), randomBytes(2)];
  const text = parts.map((p) => p.toString('base64')).join('');
  expect(await through(new Base64Decoder(), cut(Buffer.from(text)))).toEqual(Buffer.concat(parts));
});

test('the request decoder refuses a body that is not whole base64', async () => {
  await expect(through(new Base64Decoder(), ['YWJjZA=', ''])).rejects.toThrow('grpc-web-text body is not whole base64');
});
