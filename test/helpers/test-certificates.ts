/**
 * Throw-away X.509 material made with the openssl CLI (node:crypto cannot issue certificates):
 * a CA with a server certificate for 127.0.0.1 and a client certificate (for gRPC mutual TLS,
 * and as an upstream certificate the gateway does not trust), plus an unrelated "rogue" CA
 * with its own client certificate; or (createNamedCertificates) a CA whose server certificate
 * names only given DNS names, for a peer dialled at 127.0.0.1 whose certificate names a Kubernetes
 * Service, as the Helm chart's control-plane certificate does.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface CertificateFiles {
  dir: string;
  caCert: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** Issued by another CA: must be refused by a server that trusts only `caCert`. */
  rogueCaCert: string;
  rogueClientCert: string;
  rogueClientKey: string;
  dispose(): Promise<void>;
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

function makeCa(name: string, cwd: string): void {
  openssl(
    [
      'req',
      '-x509',
      ...EC,
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.crt`,
      '-days',
      '2',
      '-subj',
      `/CN=${name}`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ],
    cwd,
  );
}

async function issue(name: string, ca: string, extensions: string, cwd: string): Promise<void> {
  await writeFile(join(cwd, `${name}.ext`), extensions);
  openssl(['req', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`], cwd);
  openssl(
    [
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      `${ca}.crt`,
      '-CAkey',
      `${ca}.key`,
      '-CAcreateserial',
      '-out',
      `${name}.crt`,
      '-days',
      '2',
      '-extfile',
      `${name}.ext`,
    ],
    cwd,
  );
}

export async function createTestCertificates(): Promise<CertificateFiles> {
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-certs-'));
  makeCa('ca', dir);
  makeCa('rogue-ca', dir);
  await issue('server', 'ca', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n', dir);
  await issue('client', 'ca', 'subjectAltName=URI:spiffe://gatehouse.test/ns/default/sa/client,DNS:client.gatehouse.test\nextendedKeyUsage=clientAuth\n', dir);
  await issue('rogue-client', 'rogue-ca', 'extendedKeyUsage=clientAuth\n', dir);
  return {
    ...filesIn(dir),
    rogueCaCert: join(dir, 'rogue-ca.crt'),
    rogueClientCert: join(dir, 'rogue-client.crt'),
    rogueClientKey: join(dir, 'rogue-client.key'),
  };
}

/** The CA, server and client files `issue` wrote into `dir`. */
function filesIn(dir: string): NamedCertificates {
  const file = (name: string): string => join(dir, name);
  return {
    dir,
    caCert: file('ca.crt'),
    serverCert: file('server.crt'),
    serverKey: file('server.key'),
    clientCert: file('client.crt'),
    clientKey: file('client.key'),
    dispose: () => rm(dir, { recursive: true, force: true }),
  };
}

export type NamedCertificates = Omit<CertificateFiles, 'rogueCaCert' | 'rogueClientCert' | 'rogueClientKey'>;

/** A CA, a server certificate for `serverNames` only (no IP, no localhost) and a client certificate. */
export async function createNamedCertificates(serverNames: readonly string[]): Promise<NamedCertificates> {
  if (serverNames.length === 0) throw new Error('createNamedCertificates: at least one server name');
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-named-certs-'));
  makeCa('ca', dir);
  await issue('server', 'ca', `subjectAltName=${serverNames.map((n) => `DNS:${n}`).join(',')}\nextendedKeyUsage=serverAuth\n`, dir);
  await issue('client', 'ca', 'extendedKeyUsage=clientAuth\n', dir);
  return filesIn(dir);
}
