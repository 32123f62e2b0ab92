/**
 * A real OAuth 2.0 authorization service on loopback (node:http), standing in for the "external
 * authorization service" an OAuth server definition proxies to:
 *   POST /token   grant_type=client_credentials | refresh_token (form-urlencoded or JSON body)
 *                 → 200 {access_token, token_type: "Bearer", expires_in, refresh_token?}
 *   POST /revoke  token=<access or refresh token> → 200 with an empty body (RFC 7009)
 * Access tokens are JWTs signed with jose (alg/key/exp/nbf chosen by the test) or opaque strings.
 */
import { randomBytes, timingSafeEqual, type KeyObject } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { SignJWT } from 'jose';
import { listen } from '#proto/listen';

export type TokenMode =
  | {
      kind: 'jwt';
      alg: string;
      /** Private key (RS/ES), or the shared secret as a string or bytes (HS). */
      key: KeyObject | Uint8Array | string;
      /** Seconds from now; default 300. */
      expiresIn?: number;
      /** nbf as seconds from now (negative = in the past); absent = no nbf claim. */
      notBefore?: number;
      /** Also issue a refresh token. */
      refresh?: boolean;
    }
  | {
      kind: 'opaque';
      /** `expires_in` of the response; null leaves it out (the gateway then uses default_ttl). Default 300. */
      expiresIn?: number | null;
      /** Also issue a refresh token. Default true. */
      refresh?: boolean;
    };

export interface IssuedToken {
  accessToken: string;
  refreshToken?: string;
  expiresIn?: number;
  grantType: string;
}

export interface ReceivedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface AuthService {
  readonly url: string;
  readonly port: number;
  /** Default client, accepted for client_credentials. */
  readonly clientId: string;
  readonly clientSecret: string;
  setMode(mode: TokenMode): void;
  readonly issued: readonly IssuedToken[];
  readonly revoked: ReadonlySet<string>;
  readonly requests: readonly ReceivedRequest[];
  close(): Promise<void>;
}

const MAX_BODY = 64 * 1024;

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY) req.destroy(new Error('body too large'));
      else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function params(body: string, contentType: string | undefined): Record<string, string> {
  if (contentType?.includes('json')) {
    try {
      const parsed: unknown = JSON.parse(body);
      if (parsed && typeof parsed === 'object') {
        return Object.fromEntries(Object.entries(parsed).filter(([, v]) => typeof v === 'string')) as Record<string, string>;
      }
    } catch {
      return {};
    }
    return {};
  }
  return Object.fromEntries(new URLSearchParams(body));
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

function send(res: ServerResponse, status: number, body?: unknown): void {
  if (body === undefined) {
    res.writeHead(status, { 'content-length': '0', 'cache-control': 'no-store' });
    res.end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export async function startAuthService(initial: TokenMode = { kind: 'opaque' }): Promise<AuthService> {
  const clientId = 'gatehouse-client';
  const clientSecret = 'client-secret';
  let mode = initial;
  const issued: IssuedToken[] = [];
  const revoked = new Set<string>();
  const requests: ReceivedRequest[] = [];
  /** refresh token → still usable */
  const liveRefresh = new Set<string>();

  const opaque = () => randomBytes(24).toString('base64url');

  async function issue(grantType: string, subject: string): Promise<Record<string, unknown>> {
    const now = Math.floor(Date.now() / 1000);
    let accessToken: string;
    let expiresIn: number | undefined;
    let withRefresh: boolean;
    if (mode.kind === 'jwt') {
      expiresIn = mode.expiresIn ?? 300;
      const key = typeof mode.key === 'string' ? new TextEncoder().encode(mode.key) : mode.key;
      const jwt = new SignJWT({ scope: 'api' })
        .setProtectedHeader({ alg: mode.alg, typ: 'JWT' })
        .setSubject(subject)
        .setIssuedAt(now)
        .setExpirationTime(now + expiresIn)
        .setJti(opaque());
      if (mode.notBefore !== undefined) jwt.setNotBefore(now + mode.notBefore);
      accessToken = await jwt.sign(key);
      withRefresh = mode.refresh ?? false;
    } else {
      expiresIn = mode.expiresIn === null ? undefined : (mode.expiresIn ?? 300);
      accessToken = opaque();
      withRefresh = mode.refresh ?? true;
    }
    const refreshToken = withRefresh ? opaque() : undefined;
    if (refreshToken) liveRefresh.add(refreshToken);
    issued.push({ accessToken, refreshToken, expiresIn, grantType });
    return {
      access_token: accessToken,
      token_type: 'Bearer',
      ...(expiresIn === undefined ? {} : { expires_in: expiresIn }),
      ...(refreshToken ? { refresh_token: refreshToken } : {}),
    };
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req);
    requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'POST') return send(res, 405, { error: 'invalid_request' });
    const p = params(body, req.headers['content-type']);

    if (path === '/token') {
      if (p.grant_type === 'client_credentials') {
        let id = p.client_id ?? '';
        let secret = p.client_secret ?? '';
        const basic = /^Basic (.+)$/i.exec(req.headers.authorization ?? '');
        if (basic) [id, secret] = Buffer.from(basic[1], 'base64').toString('utf8').split(':');
        if (id !== clientId || !sameSecret(secret ?? '', clientSecret)) return send(res, 401, { error: 'invalid_client' });
        return send(res, 200, await issue('client_credentials', id));
      }
      if (p.grant_type === 'refresh_token') {
        const rt = p.refresh_token ?? '';
        if (!liveRefresh.has(rt)) return send(res, 400, { error: 'invalid_grant' });
        liveRefresh.delete(rt); // rotation: a refresh token is good for one use
        return send(res, 200, await issue('refresh_token', clientId));
      }
      return send(res, 400, { error: 'unsupported_grant_type' });
    }
    if (path === '/revoke') {
      if (!p.token) return send(res, 400, { error: 'invalid_request' });
      revoked.add(p.token);
      liveRefresh.delete(p.token);
      return send(res, 200);
    }
    return send(res, 404, { error: 'not_found' });
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: Error) => {
      if (!res.headersSent) send(res, 500, { error: 'server_error', detail: err.message });
      else res.destroy();
    });
  });
  const port = await listen(server, 0, '127.0.0.1');

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    clientId,
    clientSecret,
    setMode(next) {
      mode = next;
    },
    issued,
    revoked,
    requests,
    close() {
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
