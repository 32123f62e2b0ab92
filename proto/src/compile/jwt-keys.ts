/**
 * Import the verification keys of a jwt token strategy once (node:crypto KeyObjects), checking each key
 * against its alg: HS* → secret; RS* → RSA public key; ES256 → P-256, ES384 → P-384 public key.
 */
import { X509Certificate, createPublicKey, createSecretKey, type KeyObject } from 'node:crypto';
import { fieldError } from '../definition/field-path.js';
import { JWT_ALGS, type JwtAlg, type JwtKeySetting } from '../definition/types.js';
import type { CompiledJwtKey } from './index.js';

/** jose refuses smaller RSA keys at verification time; refusing them here keeps the error at the admin API. */
const MIN_RSA_BITS = 2048;

const EC_CURVES: Partial<Record<JwtAlg, string>> = { ES256: 'prime256v1', ES384: 'secp384r1' };
const EC_CURVE_NAMES: Partial<Record<JwtAlg, string>> = { ES256: 'P-256', ES384: 'P-384' };

/**
 * RFC 7518 §3.2: an HS256/384/512 key must hold at least 32 bytes (the hash's output size for HS256). The
 * control plane refuses shorter ones at write unless ALLOW_SHORT_HMAC_KEYS=true; compile itself accepts them,
 * so a data plane serves what its control plane allowed.
 */
export const MIN_HMAC_KEY_BYTES = 32;

/** The fields (`<field>[i].key`) of HS keys shorter than MIN_HMAC_KEY_BYTES. */
export function shortHmacKeyFields(settings: readonly JwtKeySetting[], field: string): string[] {
  return settings.flatMap((s, i) =>
    typeof s.alg === 'string' && s.alg.startsWith('HS') && typeof s.key === 'string' && Buffer.byteLength(s.key, 'utf8') < MIN_HMAC_KEY_BYTES
      ? [`${field}[${i}].key`]
      : [],
  );
}

/** `field` is the settings path for messages, e.g. `token_strategy.settings` → `token_strategy.settings[1].key ...`. */
export function compileJwtKeys(settings: readonly JwtKeySetting[], field: string): CompiledJwtKey[] {
  return settings.map((setting, i) => ({ alg: setting.alg, key: importKey(setting, `${field}[${i}]`) }));
}

function importKey({ alg, key }: JwtKeySetting, at: string): KeyObject {
  const keyField = `${at}.key`;
  const fail = (message: string): never => {
    throw fieldError(keyField, message);
  };
  if (!(JWT_ALGS as readonly string[]).includes(alg)) {
    throw fieldError(`${at}.alg`, `must be one of ${JWT_ALGS.join(', ')}`);
  }
  if (typeof key !== 'string' || key.trim() === '') return fail('is required');

  if (alg.startsWith('HS')) {
    // A PEM used as an HMAC secret is the classic RS→HS confusion set-up: never what an operator means.
    if (key.includes('-----BEGIN')) return fail(`is a PEM key, not a shared secret for ${alg}`);
    return createSecretKey(Buffer.from(key, 'utf8'));
  }

  if (/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(key)) return fail(`is a private key; ${alg} needs a public key`);
  let publicKey: KeyObject;
  try {
    publicKey = key.includes('-----BEGIN CERTIFICATE-----') ? new X509Certificate(key).publicKey : createPublicKey({ key, format: 'pem' });
  } catch {
    return fail(invalidKey(alg));
  }
  const problem = publicKeyProblem(publicKey, alg);
  return problem ? fail(problem) : publicKey;
}

const invalidKey = (alg: JwtAlg) => `is not a valid ${alg.startsWith('RS') ? 'RSA' : `EC ${EC_CURVE_NAMES[alg]}`} public key for ${alg}`;

/** Why a public key cannot verify `alg` (wrong type or curve, RSA too short), or undefined when it can. */
export function publicKeyProblem(publicKey: KeyObject, alg: JwtAlg): string | undefined {
  const invalid = invalidKey(alg);
  if (publicKey.type !== 'public') return invalid;
  const details = publicKey.asymmetricKeyDetails ?? {};
  if (alg.startsWith('RS')) {
    if (publicKey.asymmetricKeyType !== 'rsa') return invalid;
    if ((details.modulusLength ?? 0) < MIN_RSA_BITS) return `is an RSA key shorter than ${MIN_RSA_BITS} bits`;
    return undefined;
  }
  if (publicKey.asymmetricKeyType !== 'ec' || details.namedCurve !== EC_CURVES[alg]) return invalid;
  return undefined;
}
