/**
 * The admin writes as pure functions: current Definitions + request → candidate Definitions,
 * checked exactly as a data plane will see them (compileDefinitions) plus the admin-only rules
 * (unique names, no two routes with the same listen_path + hosts + methods, no dangling oauth2
 * references). Run inside the store's update(), so every check sees the latest state and a
 * rejected write leaves the store untouched.
 */
import { GatehouseError, type ErrorCode } from '#proto/errors';
import {
  mergePatch,
  parseApiDefinition,
  parseOAuthServer,
  type ApiDefinition,
  type Definitions,
  type OAuthServerDefinition,
} from '#proto/definition/index';
import { isPlainObject } from '#proto/definition/field-path';
import { compileDefinitions, type DefinitionKindName } from '#proto/compile/index';

export interface WriteResult<T> {
  defs: Definitions;
  value: T;
}

/** A library or parser failure on user input is a validation failure of that input. */
/** PUT/PATCH may repeat the name but never rename: the path names the resource. */
function requireSameName(patch: Record<string, unknown>, name: string, field: string): void {
  if (field in patch && patch[field] !== name) {
    throw new GatehouseError('VALIDATION_FAILED', `${field} in the body ("${String(patch[field])}") must match the name in the path ("${name}")`, {
      field,
    });
  }
}

export function requireObject(body: unknown): Record<string, unknown> {
  if (!isPlainObject(body)) throw new GatehouseError('VALIDATION_FAILED', 'request body must be a JSON object');
  return body;
}

interface ErrorReply {
  code: ErrorCode;
  message: string;
}

/** What differs between the kinds of definition the admin API writes; the write rules are shared. */
export interface DefinitionKind<T> {
  list(defs: Definitions): T[];
  withList(defs: Definitions, items: T[]): Definitions;
  parse(raw: unknown): T;
  /** The member that names a definition (unique, in the path, never renamed): `name`, or `username`. */
  nameField: string;
  nameOf(item: T): string;
  notFound: ErrorReply;
  nameTaken: ErrorReply;
  /** How compileDefinitions names this kind in its verdicts. */
  compileKind: DefinitionKindName;
  /** Rejects a delete the rest of the configuration still depends on. */
  checkDelete?(defs: Definitions, name: string): void;
  /**
   * Turns a POST or PUT/PATCH body into what `parse` (or the merge patch) reads, before the write
   * (basic_auth users: the password is checked and hashed, off the store's queue). Absent = as is.
   */
  prepare?(body: Record<string, unknown>, op: 'create' | 'update'): Promise<Record<string, unknown>>;
  /** What the admin API shows of a definition (basic_auth users: never the hash). Absent = all of it. */
  present?(item: T): unknown;
}

export const apiKind: DefinitionKind<ApiDefinition> = {
  list: (defs) => defs.apis,
  withList: (defs, apis) => ({ ...defs, apis }),
  parse: parseApiDefinition,
  nameField: 'name',
  nameOf: (api) => api.name,
  notFound: { code: 'API_NOT_FOUND', message: 'api definition not found' },
  nameTaken: { code: 'API_NAME_TAKEN', message: 'api name is already registered' },
  compileKind: 'api',
};

export const oauthServerKind: DefinitionKind<OAuthServerDefinition> = {
  list: (defs) => defs.oauthServers,
  withList: (defs, oauthServers) => ({ ...defs, oauthServers }),
  parse: parseOAuthServer,
  nameField: 'name',
  nameOf: (server) => server.name,
  notFound: { code: 'OAUTH_SERVER_NOT_FOUND', message: 'oauth server not found' },
  nameTaken: { code: 'OAUTH_SERVER_NAME_TAKEN', message: 'oauth server name is already registered' },
  compileKind: 'oauth-server',
  checkDelete(defs, name) {
    const user = defs.apis.find((a) => a.plugins.some((p) => p.name === 'oauth2' && p.config.server_name === name));
    if (user) {
      throw new GatehouseError('OAUTH_SERVER_IN_USE', `oauth server is referenced by the oauth2 plugin of api "${user.name}"`);
    }
  },
};

/**
 * Compiles the whole candidate with the written definition ranked last, so that when it collides
 * with anything (name, or a route with the same listen_path + hosts + methods, inactive APIs
 * included: they can be activated later by a PUT that changes nothing else) it is the one refused.
 * Other definitions' verdicts are not this write's business (the Kubernetes store may hold CRs
 * that were rejected before).
 */
function check<T>(candidate: Definitions, kind: DefinitionKind<T>, name: string): Definitions {
  const isOwn = (k: DefinitionKindName, n: string) => k === kind.compileKind && n === name;
  const compiled = compileDefinitions(candidate, { rank: (k, n) => (isOwn(k, n) ? 1 : 0) });
  const own = compiled.rejected.find((r) => isOwn(r.kind, r.name));
  if (own) throw own.error;
  return candidate;
}

export function findDefinition<T>(kind: DefinitionKind<T>, defs: Definitions, name: string): T {
  const found = kind.list(defs).find((d) => kind.nameOf(d) === name);
  if (!found) throw new GatehouseError(kind.notFound.code, kind.notFound.message);
  return found;
}

export function createDefinition<T>(kind: DefinitionKind<T>, defs: Definitions, body: unknown): WriteResult<T> {
  const created = kind.parse(requireObject(body));
  const list = kind.list(defs);
  const name = kind.nameOf(created);
  if (list.some((d) => kind.nameOf(d) === name)) throw new GatehouseError(kind.nameTaken.code, kind.nameTaken.message);
  return { defs: check(kind.withList(defs, [...list, created]), kind, name), value: created };
}

/** PUT and PATCH: RFC 7396 merge patch onto the stored definition, then full validation. */
export function updateDefinition<T>(
  kind: DefinitionKind<T>,
  defs: Definitions,
  name: string,
  body: unknown,
): WriteResult<T> {
  const stored = findDefinition(kind, defs, name);
  const patch = requireObject(body);
  requireSameName(patch, name, kind.nameField);
  const updated = kind.parse(mergePatch(stored, patch));
  const candidate = kind.withList(defs, kind.list(defs).map((d) => (kind.nameOf(d) === name ? updated : d)));
  return { defs: check(candidate, kind, name), value: updated };
}

export function deleteDefinition<T>(kind: DefinitionKind<T>, defs: Definitions, name: string): Definitions {
  findDefinition(kind, defs, name);
  kind.checkDelete?.(defs, name);
  return kind.withList(defs, kind.list(defs).filter((d) => kind.nameOf(d) !== name));
}
