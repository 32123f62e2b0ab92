/**
 * openid_connect's cookies: a JSON object with an `exp` (seconds since epoch), AES-256-GCM encrypted and
 * authenticated with the plugin's key, base64url(iv ‖ ciphertext ‖ tag). The cookie's name is the additional data,
 * so the flow cookie cannot be replayed as a session, nor one API's cookie under another name. No server state:
 * every data plane with the same definition opens what any of them sealed.
 */
import { createCipheriv, createDecipheriv, randomBytes, type KeyObject } from 'node:crypto';

const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Browsers keep at least 4096 bytes per cookie (RFC 6265 §6.1), name and attributes included. */
export const MAX_SEALED_LENGTH = 3800;

export function seal(key: KeyObject, name: string, payload: Readonly<Record<string, unknown>> & { exp: number }): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv).setAAD(Buffer.from(name));
  const body = Buffer.concat([cipher.update(JSON.stringify(payload), 'utf8'), cipher.final()]);
  return Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url');
}

/** The payload, or null when the value was not sealed by `key` under `name`, was changed, or its `exp` has passed. */
export function unseal(key: KeyObject, name: string, value: string | null, nowS: number): Record<string, unknown> | null {
  if (value === null || value.length > MAX_SEALED_LENGTH) return null;
  const raw = Buffer.from(value, 'base64url');
  if (raw.length <= IV_BYTES + TAG_BYTES) return null;
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES }).setAAD(Buffer.from(name));
    decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
    const json = Buffer.concat([decipher.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES)), decipher.final()]).toString('utf8');
    const payload = JSON.parse(json) as Record<string, unknown>;
    return typeof payload.exp === 'number' && payload.exp > nowS ? payload : null;
  } catch {
    return null;
  }
}

/** `name`'s value in a Cookie header (`a=1; b=2`; node joins several Cookie lines with "; "); null when absent or empty. */
export function cookieValue(header: string | undefined, name: string): string | null {
  if (header === undefined) return null;
  for (const pair of header.split(';')) {
    const eq = pair.indexOf('=');
    if (eq > 0 && pair.slice(0, eq).trim() === name) return pair.slice(eq + 1).trim() || null;
  }
  return null;
}

/** A Cookie header value without the cookies `names` (null when none is left). */
export function withoutCookies(header: string, names: ReadonlySet<string>): string | null {
  const kept = header.split(';').filter((pair) => {
    const eq = pair.indexOf('=');
    return !names.has((eq < 0 ? pair : pair.slice(0, eq)).trim());
  });
  const joined = kept
    .map((p) => p.trim())
    .filter((p) => p !== '')
    .join('; ');
  return joined === '' ? null : joined;
}
