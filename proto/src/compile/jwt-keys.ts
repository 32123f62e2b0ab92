/**
 * Import the verification keys of a jwt token strategy once (node:crypto KeyObjects), checking each key
 * against its alg: HS* → secret; RS* → RSA public key; ES256 → P-256, ES384 → P-384 public key.
 * OWNER: auth helper. Signature is a contract.
 */
import type { JwtKeySetting } from '../definition/types.js';
import type { CompiledJwtKey } from './index.js';

/** `field` is the settings path for messages, e.g. `token_strategy.settings` → `token_strategy.settings[1].key ...`. */
export function compileJwtKeys(settings: readonly JwtKeySetting[], field: string): CompiledJwtKey[] {
  throw new Error('not implemented');
}
