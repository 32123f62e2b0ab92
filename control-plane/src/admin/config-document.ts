/**
 * The whole configuration as one document (`GET`/`PUT /config`):
 *   {"apis": [...], "oauth_servers": [...], "basic_auth_credentials": [{"username", "password_hash", "groups"?}],
 *    "key_auth_credentials": [{"username", "key_hash", "groups"?}]}
 * What GET returns, PUT accepts unchanged: secrets are shown REDACTED (proto/src/definition/secret-fields.ts)
 * unless asked for, and a REDACTED secret keeps the current definition's of the same name. Every item is parsed by its kind's own parser, then the
 * whole is compiled as a data plane will compile it; the first problem is one VALIDATION_FAILED
 * naming the item (`apis[3].proxy.listen_path is required`).
 */
import { GatehouseError } from '#proto/errors';
import type { Definitions } from '#proto/definition/index';
import { compileDefinitions } from '#proto/compile/index';
import { isPlainObject } from '#proto/definition/field-path';
import { parsePasswordHash, verifyPassword } from '#proto/password-hash';
import { checkHmacKeyLengths } from '../store/definition-kinds.js';
import { apiKind, checkResolvableServices, oauthServerKind, requireObject, type DefinitionKind } from './definition-writes.js';
import { compileCache } from '../store/compile-cache.js';
import { basicAuthCredentialKind, keyAuthCredentialKind } from './credential-kinds.js';
import { definitionJson } from '../store/journal.js';
import { keepRedactedSecrets, redactSecrets } from '#proto/definition/secret-fields';

export interface ConfigDocument {
  apis: unknown[];
  oauth_servers: unknown[];
  basic_auth_credentials: unknown[];
  key_auth_credentials: unknown[];
}

type Member = keyof ConfigDocument;

/**
 * A key_auth credential may carry `key` instead of `key_hash` (a hand-written file): it is checked and
 * hashed as POST /credentials/key_auth does (the same key gives the same hash, so importing the same
 * file twice changes nothing). Without either it is refused (`key_hash is required`): a generated key
 * would be shown to nobody.
 */
async function resolveKey(raw: unknown): Promise<unknown> {
  if (typeof raw !== 'object' || raw === null || !('key' in raw)) return raw;
  return (await keyAuthCredentialKind.prepare!(raw as Record<string, unknown>, 'update')).body;
}

/** The document's members, in the order they are parsed and reported; `resolve` turns a hand-written item into the stored form. */
const SECTIONS: ReadonlyArray<{ member: Member; kind: DefinitionKind<unknown>; resolve?(raw: unknown, current: Definitions): Promise<unknown> }> = [
  { member: 'apis', kind: apiKind },
  { member: 'oauth_servers', kind: oauthServerKind },
  { member: 'basic_auth_credentials', kind: basicAuthCredentialKind, resolve: (raw, current) => resolvePassword(raw, current) },
  { member: 'key_auth_credentials', kind: keyAuthCredentialKind, resolve: resolveKey },
];

export interface KindDiff {
  added: string[];
  changed: string[];
  removed: string[];
}

export type ConfigDiff = Record<Member, KindDiff>;

/** `include`: as stored, secrets and hashes too (an admin's explicit export); `redact`: every secret REDACTED. */
export type SecretsShown = 'include' | 'redact';

/** Credentials as stored: username and hash (never a password or key: there is none to show), the hash REDACTED unless included. */
export function toConfigDocument(defs: Definitions, secrets: SecretsShown): ConfigDocument {
  const doc = {} as ConfigDocument;
  for (const { member, kind } of SECTIONS) {
    const items = kind.list(defs) as unknown[];
    doc[member] = secrets === 'include' ? items : items.map((item) => redactSecrets(kind.compileKind, item));
  }
  return doc;
}

/** Re-words an item's error so that it names the item: `apis[3].proxy.listen_path ...` or `apis[3]: ...`. */
function atItem(member: Member, index: number, err: unknown): GatehouseError {
  if (!(err instanceof GatehouseError)) throw err;
  const at = `${member}[${index}]`;
  const named = err.field !== undefined && err.message.startsWith(err.field);
  return new GatehouseError('VALIDATION_FAILED', named ? `${at}.${err.message}` : `${at}: ${err.message}`, {
    field: err.field === undefined ? at : `${at}.${err.field}`,
    cause: err,
  });
}

/**
 * A basic_auth user may carry `password` instead of `password_hash` (a hand-written file): it is
 * checked and hashed as POST /credentials/basic_auth does, unless it is the current user's password,
 * whose stored hash is then kept (so importing the same file twice changes nothing).
 */
async function resolvePassword(raw: unknown, current: Definitions): Promise<unknown> {
  if (typeof raw !== 'object' || raw === null || !('password' in raw)) return raw;
  const { password, ...item } = raw as Record<string, unknown>;
  const stored = (current.basicAuthCredentials ?? []).find((c) => c.username === item.username);
  const hash = stored && parsePasswordHash(stored.password_hash);
  if (hash && typeof password === 'string' && (await verifyPassword(password, hash))) {
    return { ...item, password_hash: stored!.password_hash };
  }
  return (await basicAuthCredentialKind.prepare!(raw as Record<string, unknown>, 'create')).body;
}

/** Throws the first rejection of the whole candidate, naming the item by its index. */
export function checkWholeConfig(defs: Definitions): void {
  defs.apis.forEach((api, i) => {
    try {
      checkResolvableServices(api);
    } catch (err) {
      throw atItem('apis', i, err);
    }
  });
  defs.oauthServers.forEach((server, i) => {
    try {
      checkHmacKeyLengths(server);
    } catch (err) {
      throw atItem('oauth_servers', i, err);
    }
  });
  const first = compileDefinitions(defs, { cache: compileCache }).rejected[0];
  if (!first) return;
  const section = SECTIONS.find((s) => s.kind.compileKind === first.kind)!;
  // A name defined twice is refused at its later place.
  const index = section.kind.list(defs).findLastIndex((d: unknown) => section.kind.nameOf(d) === first.name);
  throw atItem(section.member, index, first.error);
}

/**
 * Parses and validates a whole configuration document. Members left out count as empty (the
 * document replaces everything); unknown members are refused, so a typo never empties a kind.
 */
export async function parseConfigDocument(body: unknown, current: Definitions): Promise<Definitions> {
  const doc = requireObject(body);
  const unknown = Object.keys(doc).find((k) => !SECTIONS.some((s) => s.member === k));
  if (unknown !== undefined) {
    const members = SECTIONS.map((s) => s.member).join(', ');
    throw new GatehouseError('VALIDATION_FAILED', `${unknown} is not a member of the configuration (${members})`, { field: unknown });
  }
  let defs: Definitions = { apis: [], oauthServers: [], basicAuthCredentials: [], keyAuthCredentials: [] };
  for (const { member, kind, resolve } of SECTIONS) {
    const items = doc[member] ?? [];
    if (!Array.isArray(items)) throw new GatehouseError('VALIDATION_FAILED', `${member} must be an array`, { field: member });
    const parsed: unknown[] = [];
    const stored = new Map((kind.list(current) as unknown[]).map((d) => [kind.nameOf(d), d]));
    for (const [index, item] of items.entries()) {
      try {
        const name = isPlainObject(item) ? item[kind.nameField] : undefined;
        const raw = typeof name === 'string' ? keepRedactedSecrets(kind.compileKind, item, stored.get(name)) : item;
        parsed.push(kind.parse(resolve ? await resolve(raw, current) : raw));
      } catch (err) {
        throw atItem(member, index, err);
      }
    }
    defs = kind.withList(defs, parsed);
  }
  checkWholeConfig(defs);
  return defs;
}

/** Names added, changed and removed per kind (definitions are normalised, so equal JSON = equal definition). */
export function diffDefinitions(before: Definitions, after: Definitions): ConfigDiff {
  const diff = {} as ConfigDiff;
  for (const { member, kind } of SECTIONS) {
    // definitionJson: the store's JSON kept per definition object, so only new objects are stringified.
    const old = new Map(kind.list(before).map((d: unknown) => [kind.nameOf(d), definitionJson(d as object)]));
    const now = new Map(kind.list(after).map((d: unknown) => [kind.nameOf(d), definitionJson(d as object)]));
    diff[member] = {
      added: [...now.keys()].filter((n) => !old.has(n)),
      changed: [...now.keys()].filter((n) => old.has(n) && old.get(n) !== now.get(n)),
      removed: [...old.keys()].filter((n) => !now.has(n)),
    };
  }
  return diff;
}
