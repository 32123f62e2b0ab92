/**
 * The admin writes as pure functions: current Definitions + request → candidate Definitions,
 * checked exactly as a data plane will see them (compileDefinitions) plus the admin-only rules
 * (unique names, no two routes with the same listen_path + hosts + methods, no dangling oauth2
 * references). Run inside the store's update(), so every check sees the latest state and a
 * rejected write leaves the store untouched.
 */
import { GatehouseError, isGatehouseError, type ErrorCode } from '#proto/errors';
import {
  mergePatch,
  parseApiDefinition,
  parseOAuthServer,
  type ApiDefinition,
  type Definitions,
  type OAuthServerDefinition,
} from '#proto/definition/index';
import { compileApi, compileDefinitions, routeConflictKey, type CompiledRoute } from '#proto/compile/index';

export interface WriteResult<T> {
  defs: Definitions;
  value: T;
}

/** A library or parser failure on user input is a validation failure of that input. */
function asValidationError(err: unknown): GatehouseError {
  if (isGatehouseError(err)) return err;
  return new GatehouseError('VALIDATION_FAILED', err instanceof Error ? err.message : String(err), { cause: err });
}

function validated<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw asValidationError(err);
  }
}

function requireObject(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new GatehouseError('VALIDATION_FAILED', 'request body must be a JSON object');
  }
  return body as Record<string, unknown>;
}

/** PUT/PATCH may repeat the name but never rename: the path names the resource. */
function requireSameName(patch: Record<string, unknown>, name: string): void {
  if ('name' in patch && patch.name !== name) {
    throw new GatehouseError('VALIDATION_FAILED', `name in the body ("${String(patch.name)}") must match the name in the path ("${name}")`, {
      field: 'name',
    });
  }
}

interface Owner {
  kind: CompiledRoute['kind'];
  name: string;
  conflict: { code: ErrorCode; message: string };
}

/**
 * Compiles the whole candidate (any error → 400) and rejects it when a route of `owner` has the
 * same conflict key as a route of anything else. Inactive APIs count too: they can be activated
 * later by a PUT that changes nothing else.
 */
function check(candidate: Definitions, owner: Owner): Definitions {
  const compiled = validated(() => compileDefinitions(candidate));
  const routes = new Map<string, CompiledRoute>(compiled.routes.map((r) => [r.id, r]));
  for (const api of candidate.apis) {
    if (!api.active && !routes.has(`api:${api.name}`)) {
      const route = validated(() => compileApi(api));
      routes.set(route.id, route);
    }
  }
  const isOwn = (r: CompiledRoute) => r.kind === owner.kind && r.name === owner.name;
  const ownKeys = new Set([...routes.values()].filter(isOwn).map(routeConflictKey));
  if (ownKeys.size === 0) return candidate;
  for (const route of routes.values()) {
    if (!isOwn(route) && ownKeys.has(routeConflictKey(route))) {
      throw new GatehouseError(owner.conflict.code, owner.conflict.message);
    }
  }
  return candidate;
}

const apiOwner = (name: string): Owner => ({
  kind: 'api',
  name,
  conflict: { code: 'API_LISTEN_PATH_TAKEN', message: 'api listen path is already registered' },
});

const serverOwner = (name: string): Owner => ({
  kind: 'oauth-endpoint',
  name,
  conflict: { code: 'API_LISTEN_PATH_TAKEN', message: 'oauth endpoint listen path is already registered' },
});

export function findApi(defs: Definitions, name: string): ApiDefinition {
  const api = defs.apis.find((a) => a.name === name);
  if (!api) throw new GatehouseError('API_NOT_FOUND', 'api definition not found');
  return api;
}

export function findOAuthServer(defs: Definitions, name: string): OAuthServerDefinition {
  const server = defs.oauthServers.find((s) => s.name === name);
  if (!server) throw new GatehouseError('OAUTH_SERVER_NOT_FOUND', 'oauth server not found');
  return server;
}

export function createApi(defs: Definitions, body: unknown): WriteResult<ApiDefinition> {
  const api = validated(() => parseApiDefinition(requireObject(body)));
  if (defs.apis.some((a) => a.name === api.name)) {
    throw new GatehouseError('API_NAME_TAKEN', 'api name is already registered');
  }
  const candidate = { ...defs, apis: [...defs.apis, api] };
  return { defs: check(candidate, apiOwner(api.name)), value: api };
}

/** PUT and PATCH: RFC 7396 merge patch onto the stored definition, then full validation. */
export function updateApi(defs: Definitions, name: string, body: unknown): WriteResult<ApiDefinition> {
  const stored = findApi(defs, name);
  const patch = requireObject(body);
  requireSameName(patch, name);
  const api = validated(() => parseApiDefinition(mergePatch(stored, patch)));
  const candidate = { ...defs, apis: defs.apis.map((a) => (a.name === name ? api : a)) };
  return { defs: check(candidate, apiOwner(name)), value: api };
}

export function deleteApi(defs: Definitions, name: string): Definitions {
  findApi(defs, name);
  return { ...defs, apis: defs.apis.filter((a) => a.name !== name) };
}

export function createOAuthServer(defs: Definitions, body: unknown): WriteResult<OAuthServerDefinition> {
  const server = validated(() => parseOAuthServer(requireObject(body)));
  if (defs.oauthServers.some((s) => s.name === server.name)) {
    throw new GatehouseError('OAUTH_SERVER_NAME_TAKEN', 'oauth server name is already registered');
  }
  const candidate = { ...defs, oauthServers: [...defs.oauthServers, server] };
  return { defs: check(candidate, serverOwner(server.name)), value: server };
}

export function updateOAuthServer(defs: Definitions, name: string, body: unknown): WriteResult<OAuthServerDefinition> {
  const stored = findOAuthServer(defs, name);
  const patch = requireObject(body);
  requireSameName(patch, name);
  const server = validated(() => parseOAuthServer(mergePatch(stored, patch)));
  const candidate = { ...defs, oauthServers: defs.oauthServers.map((s) => (s.name === name ? server : s)) };
  return { defs: check(candidate, serverOwner(name)), value: server };
}

export function deleteOAuthServer(defs: Definitions, name: string): Definitions {
  findOAuthServer(defs, name);
  const user = defs.apis.find((a) => a.plugins.some((p) => p.name === 'oauth2' && p.config.server_name === name));
  if (user) {
    throw new GatehouseError('OAUTH_SERVER_IN_USE', `oauth server is referenced by the oauth2 plugin of api "${user.name}"`);
  }
  return { ...defs, oauthServers: defs.oauthServers.filter((s) => s.name !== name) };
}
