/**
 * key_auth lookup (plugin: data-plane/src/plugins/key-auth.ts): a snapshot's credentials are a Map
 * from the stored key_hash (proto/src/api-key.ts) to the username, so a presented key costs one
 * HMAC-SHA256 under the installation key (imported once per snapshot) and one Map lookup, whatever
 * the number of credentials; and one SHA-256 more only while the snapshot holds hashes of the
 * earlier unkeyed form.
 *
 * No constant-time comparison is needed: the Map compares digests, not keys. What timing could
 * tell an attacker is how a digest of a key they chose relates to the stored digests (a hash
 * bucket, a common prefix); turning that into a stored key means inverting the MAC (or SHA-256),
 * and the keys are high-entropy (32 random bytes, or at least 16 characters chosen by an admin).
 */
import { hashApiKey, importHashKey, isLegacyApiKeyHash, legacyHashApiKey } from '#proto/api-key';

/**
 * The owner of a presented key in `keys` (key_hash → username), or undefined. `hashKey`: the snapshot's
 * installation key (key_auth_hash_key); a snapshot with keyed hashes and no key is refused here, so it is
 * NACKed rather than served with keys that can never match.
 */
export function apiKeyLookup(keys: ReadonlyMap<string, string>, hashKey: string | undefined): (key: string) => string | undefined {
  let keyed = false;
  let legacy = false;
  for (const keyHash of keys.keys()) {
    if (isLegacyApiKeyHash(keyHash)) legacy = true;
    else keyed = true;
    if (keyed && legacy) break;
  }
  if (keyed && hashKey === undefined) throw new Error('the snapshot holds keyed key_auth hashes but no key_auth_hash_key');
  const secret = hashKey === undefined ? null : importHashKey(hashKey);
  if (!legacy) return secret ? (key) => keys.get(hashApiKey(key, secret)) : () => undefined;
  if (!keyed) return (key) => keys.get(legacyHashApiKey(key));
  return (key) => keys.get(hashApiKey(key, secret!)) ?? keys.get(legacyHashApiKey(key));
}
