/**
 * The snapshot stream is authenticated. Real CP and DP processes over real
 * sockets: plaintext only on loopback unless GRPC_INSECURE=true; a join token over server-side
 * TLS; a refused DP gets UNAUTHENTICATED and not one snapshot byte; GET /dataplanes says how each
 * DP authenticated; the CP's certificate is reloaded (SIGHUP) and served to new connections.
 */
import { X509Certificate } from 'node:crypto';
import { copyFile, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { CHANNEL_OPTIONS, clientCredentials, joinTokenMetadata, loadGatehouseProto } from '#proto/grpc';
import { createAdminClient, type AdminClient } from '../helpers/admin-client.js';
import { delay, pollUntil } from '../helpers/poll-until.js';
import { spawnService } from '../helpers/service-process.js';
import { CONTROL_PLANE_SCRIPT, startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';
import { startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { createTestCertificates, type CertificateFiles } from '../helpers/test-certificates.js';

const JOIN_TOKEN = 'e2e-join-token-0123456789abcdef';

let certs: CertificateFiles;

beforeAll(async () => {
  certs = await createTestCertificates();
});
afterAll(() => certs?.dispose());

/** Every process a test starts, stopped (exit 0 expected) after it. */
const started: Array<{ stop(): Promise<{ code: number | null }>; dispose?(): Promise<void> }> = [];
afterEach(async () => {
  const codes: Array<number | null> = [];
  for (const p of started.splice(0).reverse()) {
    codes.push((await p.stop()).code);
    await p.dispose?.();
  }
  expect(codes).toEqual(codes.map(() => 0));
});

async function cp(env: Record<string, string>): Promise<{ cp: ControlPlane; admin: AdminClient }> {
  const controlPlane = await startControlPlane({ env });
  started.push(controlPlane);
  return { cp: controlPlane, admin: await createAdminClient(controlPlane) };
}

async function dp(controlPlane: ControlPlane, env: Record<string, string>, waitForSnapshot = true): Promise<DataPlane> {
  const dataPlane = await startDataPlane({ controlPlaneAddr: controlPlane.grpcAddr, env, waitForSnapshot });
  started.push(dataPlane);
  return dataPlane;
}

const listed = async (admin: AdminClient) => (await admin.dataplanes()).body as Array<{ id: string; auth: unknown }>;
const serverTls = () => ({ GRPC_TLS_CERT: certs.serverCert, GRPC_TLS_KEY: certs.serverKey });

/**
 * A raw stream as an intruder opens it: the final status and how many pushes arrived. With
 * `cancelAfter`, the client cancels once that many pushes arrived (a served stream stays open).
 */
async function rawStream(address: string, credentials: grpc.ChannelCredentials, metadata: grpc.Metadata, cancelAfter?: number) {
  const proto = loadGatehouseProto();
  const client = new proto.Client(address, credentials, { ...CHANNEL_OPTIONS, 'grpc.use_local_subchannel_pool': 1 });
  const call = (client.StreamSnapshots as (m: grpc.Metadata) => grpc.ClientDuplexStream<object, unknown>).call(client, metadata);
  let pushes = 0;
  call.on('data', () => {
    pushes++;
    if (pushes === cancelAfter) call.cancel();
  });
  call.on('error', () => undefined);
  call.write({ hello: { id: 'intruder', hostname: 'intruder' } });
  const status = await new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
  client.close();
  return { code: status.code, details: status.details, pushes };
}

describe('plaintext only on loopback', () => {
  test('a non-loopback GRPC_HOST without TLS: the CP refuses to start (exit 1, names GRPC_INSECURE), listens on nothing', async () => {
    const proc = await spawnService({
      name: 'cp plaintext 0.0.0.0',
      script: CONTROL_PLANE_SCRIPT,
      env: { GRPC_HOST: '0.0.0.0', GRPC_PORT: '0', ADMIN_HOST: '127.0.0.1', ADMIN_PORT: '0', ADMIN_PASSWORD: 'x'.repeat(16), DATA_DIR: certs.dir },
      listeners: [],
    });
    const status = await proc.exited;
    expect(status.code).toBe(1);
    const logs = await pollUntil(async () => (/GRPC_INSECURE/.test(proc.recentLogs()) ? proc.recentLogs() : undefined), {
      what: 'the refusal to be logged',
      timeoutMs: 2_000,
    });
    expect(logs).toMatch(/ConfigError: GRPC_HOST: 0\.0\.0\.0 is not a loopback address/);
    expect(proc.lines().some((l) => l.json?.msg === 'listening')).toBe(false);
  });

  test('GRPC_INSECURE=true: it starts with a warning, and DPs show as insecure', async () => {
    const { cp: controlPlane, admin } = await cp({ GRPC_HOST: '0.0.0.0', GRPC_INSECURE: 'true', GRPC_JOIN_TOKEN: '' });
    const warning = controlPlane.process.lines().find((l) => l.json?.level === 40 && /GRPC_INSECURE=true/.test(String(l.json?.msg)));
    expect(warning).toBeDefined();
    const dataPlane = await dp(controlPlane, {});
    expect((await listed(admin)).find((row) => row.id === dataPlane.id)?.auth).toEqual({ method: 'insecure' });
  });
});

describe('a join token by default on loopback', () => {
  const plaintext = () => grpc.credentials.createInsecure();

  test('with no credential configured the CP generates a join token: a local process without it reads no snapshot; a DP with it syncs', async () => {
    const { cp: controlPlane, admin } = await cp({ GRPC_JOIN_TOKEN: '' });
    const file = join(controlPlane.dataDir, 'grpc-join-token');
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const token = (await readFile(file, 'utf8')).trim();
    expect(token.length).toBeGreaterThanOrEqual(32);
    const listening = controlPlane.process.lines().find((l) => l.json?.msg === 'listening' && l.json?.listener === 'grpc')?.json;
    expect(listening).toMatchObject({ host: '127.0.0.1', tls: false, dataPlaneAuth: 'join-token', joinTokenFile: file });

    // A local process with no token, or a guessed one: refused before one snapshot byte.
    expect(await rawStream(controlPlane.grpcAddr, plaintext(), joinTokenMetadata(undefined))).toEqual({
      code: grpc.status.UNAUTHENTICATED,
      details: expect.stringContaining('join token required'),
      pushes: 0,
    });
    expect((await rawStream(controlPlane.grpcAddr, plaintext(), joinTokenMetadata('a-guessed-token-of-some-length'))).pushes).toBe(0);

    const dataPlane = await dp(controlPlane, { GRPC_JOIN_TOKEN: token });
    expect((await listed(admin)).find((row) => row.id === dataPlane.id)?.auth).toEqual({ method: 'join-token' });
  });

  test('no environment but ephemeral ports and a fresh DATA_DIR: the CP starts, gRPC on loopback, a join token required', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'gatehouse-cp-bare-'));
    const proc = await spawnService({
      name: 'cp with no settings',
      script: CONTROL_PLANE_SCRIPT,
      env: { ADMIN_PORT: '0', GRPC_PORT: '0', DATA_DIR: dataDir },
      listeners: ['admin', 'grpc'],
    });
    try {
      const grpcListening = proc.lines().find((l) => l.json?.msg === 'listening' && l.json?.listener === 'grpc')?.json;
      expect(grpcListening).toMatchObject({ host: '127.0.0.1', dataPlaneAuth: 'join-token' });
      const raw = await rawStream(`127.0.0.1:${proc.ports.grpc}`, plaintext(), joinTokenMetadata(undefined));
      expect(raw).toMatchObject({ code: grpc.status.UNAUTHENTICATED, pushes: 0 });
    } finally {
      expect((await proc.stop()).code).toBe(0);
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  test('GRPC_INSECURE=true on loopback without a token: any local process is served (explicit), with a warning', async () => {
    const { cp: controlPlane } = await cp({ GRPC_INSECURE: 'true', GRPC_JOIN_TOKEN: '' });
    const warning = controlPlane.process.lines().find((l) => l.json?.level === 40 && /without GRPC_JOIN_TOKEN/.test(String(l.json?.msg)));
    expect(warning).toBeDefined();
    const raw = await rawStream(controlPlane.grpcAddr, plaintext(), joinTokenMetadata(undefined), 1);
    expect(raw.pushes).toBe(1);
  });
});

describe('join token over server-side TLS', () => {
  test('the right token: the DP syncs and shows as join-token', async () => {
    const { cp: controlPlane, admin } = await cp({ ...serverTls(), GRPC_JOIN_TOKEN: `older-token-still-accepted, ${JOIN_TOKEN}` });
    const dataPlane = await dp(controlPlane, { GRPC_TLS_CA: certs.caCert, GRPC_JOIN_TOKEN: JOIN_TOKEN });
    expect((await dataPlane.readyz()).status).toBe(200);
    expect((await listed(admin)).find((row) => row.id === dataPlane.id)?.auth).toEqual({ method: 'join-token' });
  });

  test.each([
    { row: 'wrong token', env: { GRPC_JOIN_TOKEN: 'a-wrong-token-of-some-length' }, says: 'join token not accepted' },
    { row: 'no token', env: { GRPC_JOIN_TOKEN: '' }, says: 'join token required' },
  ])('$row: UNAUTHENTICATED with a clear line, no snapshot, never listed, retries', async ({ env, says }) => {
    const { cp: controlPlane, admin } = await cp({ ...serverTls(), GRPC_JOIN_TOKEN: JOIN_TOKEN });
    const outsider = await dp(controlPlane, { GRPC_TLS_CA: certs.caCert, ...env }, false);
    const refusals = () =>
      outsider.process.lines().filter((l) => l.json?.level === 50 && String(l.json?.msg).startsWith(`control plane refused authentication: ${says}`));
    // Backoff 100 ms .. 1 s: several attempts, each refused and logged once.
    await pollUntil(async () => (refusals().length >= 2 ? true : undefined), { what: 'two refused attempts', details: () => outsider.recentLogs() });
    expect((await outsider.readyz()).status).toBe(503);
    expect(await listed(admin)).toEqual([]);

    const raw = await rawStream(controlPlane.grpcAddr, clientCredentials({ ca: certs.caCert }), joinTokenMetadata(env.GRPC_JOIN_TOKEN));
    expect(raw).toEqual({ code: grpc.status.UNAUTHENTICATED, details: expect.stringContaining(says), pushes: 0 });
  });
});

test('mutual TLS: GET /dataplanes shows the client certificate subject', async () => {
  const { cp: controlPlane, admin } = await cp({ ...serverTls(), GRPC_TLS_CA: certs.caCert });
  const dataPlane = await dp(controlPlane, { GRPC_TLS_CA: certs.caCert, GRPC_TLS_CERT: certs.clientCert, GRPC_TLS_KEY: certs.clientKey });
  expect((await listed(admin)).find((row) => row.id === dataPlane.id)?.auth).toEqual({ method: 'mtls', subject: 'CN=client' });
});

/** The certificate the gRPC port presents to a new TLS connection. */
function servedCertificate(port: number): Promise<X509Certificate> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: '127.0.0.1', port, ALPNProtocols: ['h2'], rejectUnauthorized: false }, () => {
      const certificate = socket.getPeerX509Certificate();
      socket.destroy();
      if (certificate) resolve(certificate);
      else reject(new Error('no peer certificate'));
    });
    socket.on('error', reject);
  });
}

test('certificate reload (SIGHUP): new connections get the new certificate, a DP trusting only the new CA syncs', async () => {
  const renewed = await createTestCertificates();
  try {
    const cert = join(certs.dir, 'reload-server.crt');
    const key = join(certs.dir, 'reload-server.key');
    await copyFile(certs.serverCert, cert);
    await copyFile(certs.serverKey, key);
    const { cp: controlPlane } = await cp({ GRPC_TLS_CERT: cert, GRPC_TLS_KEY: key, GRPC_JOIN_TOKEN: JOIN_TOKEN });
    const before = await servedCertificate(controlPlane.grpcPort);
    expect(before.fingerprint256).toBe(new X509Certificate(await readFile(certs.serverCert)).fingerprint256);

    await copyFile(renewed.serverCert, cert);
    await copyFile(renewed.serverKey, key);
    process.kill(controlPlane.process.pid, 'SIGHUP');
    await pollUntil(async () => (controlPlane.process.lines().some((l) => l.json?.msg === 'certificates reloaded') ? true : undefined), {
      what: 'the CP to log "certificates reloaded"',
      details: () => controlPlane.recentLogs(),
    });

    const after = await servedCertificate(controlPlane.grpcPort);
    expect(after.fingerprint256).toBe(new X509Certificate(await readFile(renewed.serverCert)).fingerprint256);
    const dataPlane = await dp(controlPlane, { GRPC_TLS_CA: renewed.caCert, GRPC_JOIN_TOKEN: JOIN_TOKEN });
    expect((await dataPlane.readyz()).status).toBe(200);
    // A DP that trusts only the old CA can no longer verify the CP.
    const stale = await dp(controlPlane, { GRPC_TLS_CA: certs.caCert, GRPC_JOIN_TOKEN: JOIN_TOKEN }, false);
    await delay(1_500);
    expect((await stale.readyz()).status).toBe(503);
  } finally {
    await renewed.dispose();
  }
});
