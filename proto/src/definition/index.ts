/**
 * Validate + normalise raw admin input into stored definitions (defaults filled).
 * OWNER: definitions helper. Signatures are a contract; bodies are to be written.
 */
import type { ApiDefinition, OAuthServerDefinition } from './types.js';

export * from './types.js';

/** Throws GatehouseError('VALIDATION_FAILED', '<field> ...', { field }) on the first problem found. */
export function parseApiDefinition(raw: unknown): ApiDefinition {
  throw new Error('not implemented');
}

export function parseOAuthServer(raw: unknown): OAuthServerDefinition {
  throw new Error('not implemented');
}

/** RFC 7396 JSON merge patch: members replace, objects merge, arrays replace, null removes. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  throw new Error('not implemented');
}
