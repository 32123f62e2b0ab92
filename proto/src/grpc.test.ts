/**
 * tlsServerNameOptions (GRPC_TLS_SERVER_NAME): a client dialling 127.0.0.1 verifies a server whose
 * certificate names only a Service DNS name when, and only when, it is told that name.
 */
import * as grpc from '@grpc/grpc-js';
import { createNamedCertificates, type NamedCertificates } from '../../test/helpers/named-certificates.js';
import { clientCredentials, loadGatehouseProto, serverCredentials, tlsServerNameOptions } from './grpc.js';

const SERVICE_NAME = 'gatehouse-control-plane.gatehouse.svc.cluster.local';

let certs: NamedCertificates;
let server: grpc.Server;
let port: number;
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
  port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', serverCredentials(tls), (err, bound) => (err ? reject(err) : resolve(bound))),
  );
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
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
  const stream = (client['StreamSnapshots'] as () => grpc.ClientDuplexStream<unknown, unknown>).call(client);
  const status = await new Promise<grpc.StatusObject>((resolve) => {
    stream.on('status', resolve);
    stream.on('error', () => undefined);
    stream.on('data', () => undefined);
  });
  client.close();
  expect(status.code).toBe(grpc.status.OK);
  expect(authorities.at(-1)).toBe(SERVICE_NAME);
});
