/**
 * Validate + normalise raw admin input into stored definitions (defaults filled).
 * Errors: GatehouseError('VALIDATION_FAILED', '<field path> ...', { field }) for the first problem found.
 * Unknown members are stripped silently (Janus-era clients send extra fields); null members count
 * as absent. Deeper checks (listen_path parameter syntax and regexes, target URLs, oauth2 server
 * existence, PEM keys) belong to the compile stage (proto/src/compile).
 */
export * from './types.js';
export { parseApiDefinition } from './api-schema.js';
export { parseOAuthServer } from './oauth-server-schema.js';
export { parseBasicAuthCredential } from './basic-auth-credential-schema.js';
export { parseKeyAuthCredential } from './key-auth-credential-schema.js';
export { mergePatch } from './merge-patch.js';
