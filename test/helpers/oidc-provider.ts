/**
 * A minimal, real OpenID Connect provider on loopback (node:http + jose), for openid_connect's e2e tests: the
 * discovery document, a JWKS, `/authorize` that signs in one fixed user at once (302 back to redirect_uri with a
 * code and the state), `/token` that checks the client's Basic credentials, the code (one use, its redirect_uri) and
 * the PKCE S256 verifier, and answers a signed ID token with the authorization request's nonce; `/logout` is the
 * end_session_endpoint. Every token request is recorded with its verdict.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { listen } from '#proto/listen';

export interface TokenRequestRecord {
  authorization: string | undefined;
  form: Record<string, string>;
  /** 'ok' or the OAuth error answered. */
  verdict: string;
}

export interface OidcProvider {
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
  /** The user every sign-in signs in. */
  readonly subject: string;
  readonly tokenRequests: readonly TokenRequestRecord[];
  readonly discoveryFetches: number;
  readonly jwksFetches: number;
  /** Claims set on (or, undefined, taken off) the next ID tokens: a wrong `aud`, `nonce` or `iss`; {} for none. */
  overrideIdToken(claims: Record<string, unknown>): void;
  close(): Promise<void>;
}

interface Grant {
  clientId: string;
  redirectUri: string;
  challenge: string;
  nonce: string;
}

const b64url = (data: string) => createHash('sha256').update(data).digest('base64url');

export async function startOidcProvider(options: { clientId?: string; clientSecret?: string; subject?: string; email?: string } = {}): Promise<OidcProvider> {
  const clientId = options.clientId ?? 'gatehouse-app';
  const clientSecret = options.clientSecret ?? 'app secret: 0123456789';
  const subject = options.subject ?? 'user-42';
  const { publicKey, privateKey } = await generateKeyPair('RS256');
  const kid = 'test-key';
  const jwk: JWK = { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' };
  const grants = new Map<string, Grant>();
  const tokenRequests: TokenRequestRecord[] = [];
  let discoveryFetches = 0;
  let jwksFetches = 0;
  let issuer = '';
  let overrides: Record<string, unknown> = {};

  const json = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(body));
  };

  const readBody = async (req: IncomingMessage) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  };

  const signIdToken = (grant: Grant, key: CryptoKey) => {
    const at = Math.floor(Date.now() / 1000);
    const claims: Record<string, unknown> = {
      iss: issuer,
      aud: grant.clientId,
      sub: subject,
      iat: at,
      exp: at + 300,
      nonce: grant.nonce,
      email: options.email ?? 'ada@example.com',
      ...overrides,
    };
    for (const [k, v] of Object.entries(claims)) if (v === undefined) delete claims[k];
    return new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid }).sign(key);
  };

  async function token(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const form = Object.fromEntries(new URLSearchParams(await readBody(req)));
    const record: TokenRequestRecord = { authorization: req.headers.authorization, form, verdict: 'ok' };
    tokenRequests.push(record);
    const refuse = (status: number, error: string) => {
      record.verdict = error;
      json(res, status, { error });
    };
    const expected = `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(clientSecret).replace(/%20/g, '+')}`).toString('base64')}`;
    if (req.headers.authorization !== expected) return refuse(401, 'invalid_client');
    const grant = grants.get(form.code ?? '');
    grants.delete(form.code ?? '');
    if (form.grant_type !== 'authorization_code' || !grant || grant.clientId !== clientId) return refuse(400, 'invalid_grant');
    if (form.redirect_uri !== grant.redirectUri) return refuse(400, 'invalid_grant');
    if (!form.code_verifier || b64url(form.code_verifier) !== grant.challenge) return refuse(400, 'invalid_grant');
    json(res, 200, { access_token: randomBytes(16).toString('hex'), token_type: 'Bearer', expires_in: 300, id_token: await signIdToken(grant, privateKey) });
  }

  function authorize(url: URL, res: ServerResponse): void {
    const p = url.searchParams;
    const redirectUri = p.get('redirect_uri');
    if (
      p.get('response_type') !== 'code' ||
      p.get('client_id') !== clientId ||
      !redirectUri ||
      p.get('code_challenge_method') !== 'S256' ||
      !p.get('code_challenge') ||
      !p.get('nonce')
    ) {
      json(res, 400, { error: 'invalid_request' });
      return;
    }
    const code = randomBytes(16).toString('base64url');
    grants.set(code, { clientId, redirectUri, challenge: p.get('code_challenge')!, nonce: p.get('nonce')! });
    const back = new URL(redirectUri);
    back.searchParams.set('code', code);
    back.searchParams.set('state', p.get('state') ?? '');
    res.writeHead(302, { location: back.href }).end();
  }

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', issuer);
    if (url.pathname === '/.well-known/openid-configuration') {
      discoveryFetches++;
      return json(res, 200, {
        issuer,
        authorization_endpoint: `${issuer}/authorize`,
        token_endpoint: `${issuer}/token`,
        jwks_uri: `${issuer}/jwks`,
        end_session_endpoint: `${issuer}/logout`,
        response_types_supported: ['code'],
        subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['RS256'],
      });
    }
    if (url.pathname === '/jwks') {
      jwksFetches++;
      return json(res, 200, { keys: [jwk] });
    }
    if (url.pathname === '/authorize') return authorize(url, res);
    if (url.pathname === '/token' && req.method === 'POST') return void token(req, res).catch(() => json(res, 500, { error: 'server_error' }));
    json(res, 404, { error: 'not_found' });
  });
  const port = await listen(server, 0, '127.0.0.1');
  issuer = `http://127.0.0.1:${port}`;

  return {
    issuer,
    clientId,
    clientSecret,
    subject,
    tokenRequests,
    get discoveryFetches() {
      return discoveryFetches;
    },
    get jwksFetches() {
      return jwksFetches;
    },
    overrideIdToken(claims) {
      overrides = claims;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
