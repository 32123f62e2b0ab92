/**
 * A CA with a server certificate for the given DNS names only (no IP, no localhost) and a client
 * certificate, made with the openssl CLI: for a peer dialled at 127.0.0.1 whose certificate names a
 * Kubernetes Service, as the Helm chart's control-plane certificate does.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface NamedCertificates {
  dir: string;
  caCert: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  dispose(): Promise<void>;
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

export async function createNamedCertificates(serverNames: readonly string[]): Promise<NamedCertificates> {
  if (serverNames.length === 0) throw new Error('createNamedCertificates: at least one server name');
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-named-certs-'));
  openssl(
    ['req', '-x509', ...EC, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=named-ca',
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'],
    dir,
  );
  const leaf = async (name: string, extensions: string): Promise<void> => {
    await writeFile(join(dir, `${name}.ext`), extensions);
    openssl(['req', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`], dir);
    openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial',
      '-out', `${name}.crt`, '-days', '2', '-extfile', `${name}.ext`], dir);
  };
  await leaf('server', `subjectAltName=${serverNames.map((n) => `DNS:${n}`).join(',')}\nextendedKeyUsage=serverAuth\n`);
  await leaf('client', 'extendedKeyUsage=clientAuth\n');
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
