import { readFile } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { connect, type PeerCertificate } from 'node:tls';
import { listen } from '#proto/listen';
import type { GatewayListenerTls } from '#proto/snapshot/codec';
import { createNamedCertificates, type NamedCertificates } from '../../../test/helpers/test-certificates.js';
import { buildGatewayTls, type ServingTable } from '../table/index.js';
import type { ProxyResponse } from './forward.js';
import { createGatewayTlsListener, type ProxyHttpServer } from './listener.js';

/** One certificate per listener hostname, its CN naming it ("" = the listener without hostname). */
const HOSTNAMES = ['a.example.org', '*.example.org', '*.b.example.org', ''];
const certs = new Map<string, NamedCertificates>();
const listenerOf = async (hostname: string, name = hostname || 'any'): Promise<GatewayListenerTls> => {
  const set = certs.get(hostname)!;
  return {
    name,
    hostname,
    port: 443,
    certificates: [{ certificate_chain: await readFile(set.serverCert, 'utf8'), private_key: await readFile(set.serverKey, 'utf8') }],
  };
};

let table: Pick<ServingTable, 'gatewayTls'> = { gatewayTls: null };
let server: ProxyHttpServer;
let port: number;

beforeAll(async () => {
  // The server name a certificate names does not matter here: which certificate was served is what is asserted.
  for (const hostname of HOSTNAMES) certs.set(hostname, await createNamedCertificates([hostname.replace('*', 'wildcard') || 'any.test']));
  const handle = (req: IncomingMessage, res: ProxyResponse) => res.end(`served ${req.headers.host}`);
  server = createGatewayTlsListener({ tables: { current: () => table as ServingTable } }, handle, (_req, res) => res.end()).server;
  port = await listen(server, 0, '127.0.0.1');
}, 60_000);

afterAll(async () => {
  server?.close();
  for (const set of certs.values()) await set.dispose();
});

/** The certificate a handshake with `servername` (none: no SNI) is served, by the name it was issued for; or the handshake's error. */
function served(servername: string | undefined): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port, ...(servername !== undefined && { servername }), rejectUnauthorized: false }, () => {
      const cert = socket.getPeerCertificate() as PeerCertificate;
      socket.end();
      resolve((cert.subjectaltname ?? '').replace('DNS:', ''));
    });
    socket.on('error', (err) => resolve(`failed: ${err.message}`));
  });
}

describe('Gateway HTTPS listener: the certificate by SNI', () => {
  // Each test sets the table (tests run in random order, and some swap it).
  beforeEach(async () => {
    table = { gatewayTls: buildGatewayTls(await Promise.all(HOSTNAMES.map((h) => listenerOf(h)))) };
  });

  test.each([
    ['the exact hostname', 'a.example.org', 'a.example.org'],
    ['the exact hostname, whatever the case', 'A.Example.ORG', 'a.example.org'],
    ['a wildcard for one label', 'c.example.org', 'wildcard.example.org'],
    ['a wildcard for several labels', 'x.y.example.org', 'wildcard.example.org'],
    ['the longest wildcard', 'x.b.example.org', 'wildcard.b.example.org'],
    ['a wildcard never for its bare domain: the listener without hostname', 'example.org', 'any.test'],
    ['a name no hostname matches: the listener without hostname', 'other.test', 'any.test'],
  ])('%s', async (_name, servername, issuedFor) => {
    expect(await served(servername)).toBe(issuedFor);
  });

  test('a client without SNI gets the listener without hostname', async () => {
    expect(await served(undefined)).toBe('any.test');
  });
});

describe('Gateway HTTPS listener without a listener for any hostname', () => {
  beforeEach(async () => {
    table = { gatewayTls: buildGatewayTls([await listenerOf('a.example.org'), await listenerOf('*.example.org')]) };
  });

  test('a name no listener takes fails the handshake; the others are served', async () => {
    expect(await served('other.test')).toMatch(/^failed: /);
    expect(await served('example.org')).toMatch(/^failed: /);
    expect(await served('c.example.org')).toBe('wildcard.example.org');
  });

  test('a client without SNI fails the handshake (no certificate to serve)', async () => {
    expect(await served(undefined)).toMatch(/^failed: /);
  });

  test('the certificates follow the serving table, connection by connection', async () => {
    expect(await served('a.example.org')).toBe('a.example.org');
    table = { gatewayTls: buildGatewayTls([await listenerOf('', 'swapped')]) };
    expect(await served('a.example.org')).toBe('any.test');
    expect(await served(undefined)).toBe('any.test');
    table = { gatewayTls: null };
    expect(await served('a.example.org')).toMatch(/^failed: /);
    expect(await served(undefined)).toMatch(/^failed: /);
  });
});

test('a certificate or key that does not parse, or a key of another certificate, fails the build naming the listener, never the key', async () => {
  const good = await listenerOf('a.example.org');
  const other = await listenerOf('*.example.org');
  const junk = { ...good, certificates: [{ certificate_chain: 'not a certificate', private_key: good.certificates[0].private_key }] };
  const mismatched = { ...good, certificates: [{ ...good.certificates[0], private_key: other.certificates[0].private_key }] };
  for (const bad of [junk, mismatched]) {
    let message = '';
    try {
      buildGatewayTls([bad]);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/^gateway listener a\.example\.org: /);
    expect(message).not.toContain('PRIVATE KEY');
    expect(message).not.toContain(bad.certificates[0].private_key.split('\n')[1]);
  }
});

test('with http2, h2 is offered by ALPN on the Gateway HTTPS listener, the certificate still by SNI', async () => {
  const { connect: connectH2 } = await import('node:http2');
  const tables = { current: () => table as ServingTable };
  table = { gatewayTls: buildGatewayTls([await listenerOf('a.example.org')]) };
  const h2 = createGatewayTlsListener(
    { tables, http2: true },
    (req, res) => res.end(`served ${req.headers.host ?? req.headers[':authority']}`),
    (_req, res) => res.end(),
  ).server;
  const h2Port = await listen(h2, 0, '127.0.0.1');
  try {
    const session = connectH2(`https://127.0.0.1:${h2Port}`, { servername: 'a.example.org', rejectUnauthorized: false });
    const body = await new Promise<string>((resolve, reject) => {
      const stream = session.request({ ':path': '/', ':authority': 'a.example.org' });
      let text = '';
      stream.on('data', (chunk: Buffer) => (text += chunk));
      stream.on('end', () => resolve(text));
      stream.on('error', reject);
    });
    expect(session.alpnProtocol).toBe('h2');
    expect((session.socket as import('node:tls').TLSSocket).getPeerCertificate().subjectaltname).toBe('DNS:a.example.org');
    expect(body).toBe('served a.example.org');
    session.close();
  } finally {
    h2.close();
  }
});
