/**
 * Admin authentication: POST /login checks the configured credentials in constant time and
 * issues a short-lived HS256 JWT; every other admin call presents it as a bearer token.
 * Two roles: `admin` (ADMIN_USER) may do everything, `viewer` (ADMIN_VIEWER_USER) may only read.
 * Each token carries a fingerprint of the credential it was issued for (an HMAC, keyed with the
 * signing secret, of role, user and password hash), so changing a password or the secret
 * invalidates every token issued before.
 */
import { createHmac, randomUUID, webcrypto } from 'node:crypto';
import { SignJWT, jwtVerify } from 'jose';
import { GatehouseError } from '#proto/errors';
import { sameSecret, secretDigest } from '#proto/secret-compare';

export const ADMIN_TOKEN_ISSUER = 'gatehouse-control-plane';
export const ADMIN_TOKEN_AUDIENCE = 'gatehouse-admin';

export type AdminRole = 'admin' | 'viewer';

export interface AdminAuthOptions {
  user: string;
  password: string;
  /** A read-only account (ADMIN_VIEWER_USER / ADMIN_VIEWER_PASSWORD). */
  viewer?: { user: string; password: string } | null;
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

export interface AdminIdentity {
  user: string;
  role: AdminRole;
}

export interface AdminAuth {
  /** Throws ADMIN_UNAUTHORIZED on wrong credentials. */
  login(username: unknown, password: unknown): Promise<LoginResponse>;
  /** Checks an Authorization header value; throws ADMIN_UNAUTHORIZED. */
  verify(authorization: string | undefined): Promise<AdminIdentity>;
}

interface Account {
  identity: AdminIdentity;
  userDigest: Buffer;
  passwordDigest: Buffer;
  /** The `cfp` claim of tokens issued for this credential. */
  fingerprint: string;
  fingerprintDigest: Buffer;
}

const unauthorized = (message: string) => new GatehouseError('ADMIN_UNAUTHORIZED', message);

/**
 * The `cfp` claim of a token issued to (role, user, password) under `jwtSecret`. Keyed with the
 * signing secret, over the password's hash: the claim reveals nothing about the password.
 */
export function credentialFingerprint(role: AdminRole, user: string, password: string, jwtSecret: string): string {
  return createHmac('sha256', jwtSecret).update(`${role}\n${user}\n`).update(secretDigest(password)).digest('base64url');
}

export function createAdminAuth({ user, password, viewer, jwtSecret, tokenTtlSeconds, now = () => new Date() }: AdminAuthOptions): AdminAuth {
  const account = (role: AdminRole, name: string, secret: string): Account => {
    const fingerprint = credentialFingerprint(role, name, secret, jwtSecret);
    return {
      identity: { user: name, role },
      userDigest: secretDigest(name),
      passwordDigest: secretDigest(secret),
      fingerprint,
      fingerprintDigest: secretDigest(fingerprint),
    };
  };
  const accounts = [account('admin', user, password), ...(viewer ? [account('viewer', viewer.user, viewer.password)] : [])];
  // Imported once: given the secret's bytes, jose would import them through WebCrypto on every admin request.
  const key = webcrypto.subtle.importKey('raw', new TextEncoder().encode(jwtSecret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']);

  return {
    async login(username, givenPassword) {
      // Every comparison runs (no short-circuit), so timing does not reveal which account or part failed.
      let matched: Account | undefined;
      for (const candidate of accounts) {
        const userOk = sameSecret(username, candidate.userDigest);
        const passwordOk = sameSecret(givenPassword, candidate.passwordDigest);
        if (userOk && passwordOk && !matched) matched = candidate;
      }
      if (!matched || typeof givenPassword !== 'string' || givenPassword === '') throw unauthorized('invalid credentials');
      const issuedAt = Math.floor(now().getTime() / 1000);
      const token = await new SignJWT({ role: matched.identity.role, cfp: matched.fingerprint })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setSubject(matched.identity.user)
        .setIssuer(ADMIN_TOKEN_ISSUER)
        .setAudience(ADMIN_TOKEN_AUDIENCE)
        .setIssuedAt(issuedAt)
        .setExpirationTime(issuedAt + tokenTtlSeconds)
        .setJti(randomUUID())
        .sign(await key);
      return { access_token: token, token_type: 'Bearer', expires_in: tokenTtlSeconds };
    },

    async verify(authorization) {
      if (!authorization) throw unauthorized('missing bearer token');
      const match = /^Bearer +([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*)$/i.exec(authorization.trim());
      if (!match) throw unauthorized('malformed authorization header');
      let payload: Record<string, unknown>;
      try {
        ({ payload } = await jwtVerify(match[1], await key, {
          algorithms: ['HS256'],
          issuer: ADMIN_TOKEN_ISSUER,
          audience: ADMIN_TOKEN_AUDIENCE,
          requiredClaims: ['exp', 'sub'],
          currentDate: now(),
        }));
      } catch (err) {
        throw new GatehouseError('ADMIN_UNAUTHORIZED', 'invalid or expired token', { cause: err });
      }
      const holder = accounts.find((a) => a.identity.role === payload.role && a.identity.user === payload.sub);
      // A token issued for another password (or role, or user) no longer names a live credential.
      if (!holder || !sameSecret(payload.cfp, holder.fingerprintDigest)) {
        throw unauthorized('token was issued for credentials that changed; log in again');
      }
      return { ...holder.identity };
    },
  };
}
