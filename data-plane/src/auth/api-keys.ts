/**
 * key_auth lookup (plugin: data-plane/src/plugins/key-auth.ts): a snapshot's credentials are a Map
 * from the stored key_hash (SHA-256 of the key, proto/src/api-key.ts) to the username, so a
 * presented key costs one SHA-256 and one Map lookup, whatever the number of credentials.
 *
 * No constant-time comparison is needed: the Map compares digests, not keys. What timing could
 * tell an attacker is how a digest of a key they chose relates to the stored digests (a hash
 * bucket, a common prefix); turning that into a stored key means finding a preimage of SHA-256,
 * and the keys are high-entropy (32 random bytes, or at least 16 characters chosen by an admin).
 */
import { hashApiKey } from '#proto/api-key';

/** The owner of a presented key in `keys` (key_hash → username), or undefined. */
export function apiKeyLookup(keys: ReadonlyMap<string, string>): (key: string) => string | undefined {
  return (key) => keys.get(hashApiKey(key));
}
