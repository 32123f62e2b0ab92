/**
 * Admin authentication: POST /login checks the configured credentials in constant time and
 * issues a short-lived HS256 JWT; every other admin call presents it as a bearer token.
 */
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { SignJWT, jwtVerify } from 'jose';
import { GatehouseError } from '#proto/errors';

export const ADMIN_TOKEN_ISSUER = 'gatehouse-control-plane';
export const ADMIN_TOKEN_AUDIENCE = 'gatehouse-admin';

export interface AdminAuthOptions {
  user: string;
  password: string;
  /** HS256 signing secret (shared by CP replicas). */
  jwtSecret: string;
  tokenTtlSeconds: number;
  /** Clock, injectable so expiry is tested without sleeping. */
  now?: () => Date;
}

export interface LoginResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
}

export interface AdminAuth {
  login(username: unknown, password: unknown): Promise<LoginResponse>;
  /** Checks an Authorization header value; throws ADMIN_UNAUTHORIZED. */
  verify(authorization: string | undefined): Promise<void>;
}

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();

/** Equal-length digests, so neither length nor content of the secret leaks through timing. */
function sameSecret(given: unknown, expected: Buffer): boolean {
  return timingSafeEqual(digest(typeof given === 'string' ? given : ''), expected);
}

const unauthorized = (message: string) => new GatehouseError('ADMIN_UNAUTHORIZED', message);

export function createAdminAuth({ user, password, jwtSecret, tokenTtlSeconds, now = () => new Date() }: AdminAuthOptions): AdminAuth {
  const userDigest = digest(user);
  const passwordDigest = digest(password);
  const key = new TextEncoder().encode(jwtSecret);

  return {
    async login(username, givenPassword) {
      // Both comparisons always run (no short-circuit), so timing does not reveal which one failed.
      const userOk = sameSecret(username, userDigest);
      const passwordOk = sameSecret(givenPassword, passwordDigest);
      if (!(userOk && passwordOk) || typeof givenPassword !== 'string' || givenPassword === '') {
        throw unauthorized('invalid credentials');
      }
      const issuedAt = Math.floor(now().getTime() / 1000);
      const token = await new SignJWT({})
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setSubject(user)
        .setIssuer(ADMIN_TOKEN_ISSUER)
        .setAudience(ADMIN_TOKEN_AUDIENCE)
        .setIssuedAt(issuedAt)
        .setExpirationTime(issuedAt + tokenTtlSeconds)
        .setJti(randomUUID())
        .sign(key);
      return { access_token: token, token_type: 'Bearer', expires_in: tokenTtlSeconds };
    },

    async verify(authorization) {
      if (!authorization) throw unauthorized('missing bearer token');
      const match = /^Bearer +([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*)$/i.exec(authorization.trim());
      if (!match) throw unauthorized('malformed authorization header');
      try {
        const { payload } = await jwtVerify(match[1], key, {
          algorithms: ['HS256'],
          issuer: ADMIN_TOKEN_ISSUER,
          audience: ADMIN_TOKEN_AUDIENCE,
          requiredClaims: ['exp', 'sub'],
          currentDate: now(),
        });
        if (payload.sub !== user) throw unauthorized('invalid or expired token');
      } catch (err) {
        throw new GatehouseError('ADMIN_UNAUTHORIZED', 'invalid or expired token', { cause: err });
      }
    },
  };
}
