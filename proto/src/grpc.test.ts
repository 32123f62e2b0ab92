/**
 * tlsServerNameOptions (GRPC_TLS_SERVER_NAME): a client dialling 127.0.0.1 verifies a server whose
 * certificate names only a Service DNS name when, and only when, it is told that name.
 */
import * as grpc from '@grpc/grpc-js';
import { createNamedCertificates, type NamedCertificates } from '../../test/helpers/test-certificates.js';
import { watchCertificateFiles, type CertificateWatcher } from './certificate-files.js';
import {
  GRPC_TLS_NAMES,
  clientCredentials,
  clientTlsFromEnv,
  hostOfAddress,
  isLoopbackHost,
  joinTokenMetadata,
  loadGatehouseProto,
  presentedJoinToken,
  serverCredentials,
  serverTlsFromEnv,
  tlsServerNameOptions,
} from './grpc.js';

const SERVICE_NAME = 'gatehouse-control-plane.gatehouse.svc.cluster.local';

let certs: NamedCertificates;
let server: grpc.Server;
let port: number;
let certificates: CertificateWatcher;
/** :authority of every stream the server saw. */
const authorities: string[] = [];

beforeAll(async () => {
  certs = await createNamedCertificates([SERVICE_NAME]);
  const proto = loadGatehouseProto();
  server = new grpc.Server();
  server.addService(proto.service, {
    StreamSnapshots: (call: grpc.ServerDuplexStream<unknown, unknown>) => {
      authorities.push(call.getHost());
      call.end();
    },
  });
  const tls = { cert: certs.serverCert, key: certs.serverKey, ca: certs.caCert };
  certificates = watchCertificateFiles(tls, { names: GRPC_TLS_NAMES, intervalMs: 60_000 });
  port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', serverCredentials(certificates, true), (err, bound) => (err ? reject(err) : resolve(bound))),
  );
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
  certificates.close();
  await certs.dispose();
});

/** Connects a fresh channel; resolves with the handshake outcome within `ms`. */
function connect(options: grpc.ChannelOptions, ms = 1_000): Promise<'ready' | Error> {
  const proto = loadGatehouseProto({ clientChannelOptions: options });
  const credentials = clientCredentials({ cert: certs.clientCert, key: certs.clientKey, ca: certs.caCert });
  const client = new proto.Client(`127.0.0.1:${port}`, credentials, { 'grpc.use_local_subchannel_pool': 1 });
  return new Promise((resolve) => {
    client.waitForReady(Date.now() + ms, (err) => {
      client.close();
      resolve(err ?? 'ready');
    });
  });
}

test('no override: the certificate does not name 127.0.0.1, the handshake is refused', async () => {
  expect(tlsServerNameOptions(undefined)).toEqual({});
  expect(tlsServerNameOptions('')).toEqual({});
  expect(await connect({})).toBeInstanceOf(Error);
});

test('override with a name the certificate does not hold: refused', async () => {
  expect(await connect(tlsServerNameOptions('other.gatehouse.svc'))).toBeInstanceOf(Error);
});

test('override with the Service name: verified, and sent as :authority', async () => {
  const options = tlsServerNameOptions(SERVICE_NAME);
  expect(options).toEqual({ 'grpc.ssl_target_name_override': SERVICE_NAME, 'grpc.default_authority': SERVICE_NAME });
  expect(await connect(options)).toBe('ready');

  // A real call on the overriding client class: the options reach every channel it opens.
  const proto = loadGatehouseProto({ clientChannelOptions: options });
  const credentials = clientCredentials({ cert: certs.clientCert, key: certs.clientKey, ca: certs.caCert });
  const client = new proto.Client(`127.0.0.1:${port}`, credentials, {});
  const stream = (client.StreamSnapshots as () => grpc.ClientDuplexStream<unknown, unknown>).call(client);
  const status = await new Promise<grpc.StatusObject>((resolve) => {
    stream.on('status', resolve);
    stream.on('error', () => undefined);
    stream.on('data', () => undefined);
  });
  client.close();
  expect(status.code).toBe(grpc.status.OK);
  expect(authorities.at(-1)).toBe(SERVICE_NAME);
});

describe('transport settings', () => {
  test.each<[string, boolean]>([
    ['127.0.0.1', true],
    ['127.8.9.10', true],
    ['::1', true],
    ['[::1]', true],
    ['localhost', true],
    ['::ffff:127.0.0.1', true],
    ['0.0.0.0', false],
    ['::', false],
    ['10.0.0.1', false],
    ['128.0.0.1', false],
    ['cp.example.com', false],
  ])('isLoopbackHost(%s) = %s', (host, loopback) => {
    expect(isLoopbackHost(host)).toBe(loopback);
  });

  test.each([
    ['127.0.0.1:8082', '127.0.0.1'],
    ['[::1]:8082', '::1'],
    ['cp.gatehouse.svc:8082', 'cp.gatehouse.svc'],
    ['cp', 'cp'],
  ])('hostOfAddress(%s) = %s', (address, host) => {
    expect(hostOfAddress(address)).toBe(host);
  });

  test.each<[string, NodeJS.ProcessEnv, unknown]>([
    ['nothing: plaintext', {}, null],
    ['cert + key: TLS', { GRPC_TLS_CERT: 'c', GRPC_TLS_KEY: 'k' }, { cert: 'c', key: 'k' }],
    ['cert + key + CA: mutual TLS', { GRPC_TLS_CERT: 'c', GRPC_TLS_KEY: 'k', GRPC_TLS_CA: 'a' }, { cert: 'c', key: 'k', ca: 'a' }],
  ])('serverTlsFromEnv: %s', (_name, env, expected) => {
    expect(serverTlsFromEnv(env)).toEqual(expected);
  });

  test.each<[string, NodeJS.ProcessEnv, unknown]>([
    ['nothing: plaintext', {}, null],
    ['CA: TLS, the CP verified', { GRPC_TLS_CA: 'a' }, { ca: 'a' }],
    ['CA + cert + key: mutual TLS', { GRPC_TLS_CERT: 'c', GRPC_TLS_KEY: 'k', GRPC_TLS_CA: 'a' }, { ca: 'a', cert: 'c', key: 'k' }],
  ])('clientTlsFromEnv: %s', (_name, env, expected) => {
    expect(clientTlsFromEnv(env)).toEqual(expected);
  });

  test.each<[string, (env: NodeJS.ProcessEnv) => unknown, NodeJS.ProcessEnv, string]>([
    ['server: key alone', serverTlsFromEnv, { GRPC_TLS_KEY: 'k' }, 'GRPC_TLS_KEY: needs GRPC_TLS_CERT (both or neither)'],
    ['server: CA alone', serverTlsFromEnv, { GRPC_TLS_CA: 'a' }, 'GRPC_TLS_CA: needs GRPC_TLS_CERT and GRPC_TLS_KEY'],
    [
      'client: cert + key without CA',
      clientTlsFromEnv,
      { GRPC_TLS_CERT: 'c', GRPC_TLS_KEY: 'k' },
      'GRPC_TLS_CA: is required with GRPC_TLS_CERT and GRPC_TLS_KEY',
    ],
  ])('%s is refused', (_name, parse, env, message) => {
    expect(() => parse(env)).toThrow(message);
  });

  test('join token metadata round trip; nothing sent without a token', () => {
    expect(presentedJoinToken(joinTokenMetadata('tok-123'))).toBe('tok-123');
    expect(joinTokenMetadata(undefined).get('authorization')).toEqual([]);
    expect(presentedJoinToken(new grpc.Metadata())).toBeUndefined();
  });
});
