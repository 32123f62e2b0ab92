/**
 * The whole configuration as one document (`GET`/`PUT /config`):
 *   {"apis": [...], "oauth_servers": [...], "basic_auth_credentials": [{"username", "password_hash"}]}
 * What GET returns, PUT accepts unchanged. Every item is parsed by its kind's own parser, then the
 * whole is compiled as a data plane will compile it; the first problem is one VALIDATION_FAILED
 * naming the item (`apis[3].proxy.listen_path is required`).
 */
import { GatehouseError } from '#proto/errors';
import type { Definitions } from '#proto/definition/index';
import { compileDefinitions } from '#proto/compile/index';
import { parsePasswordHash, verifyPassword } from '#proto/password-hash';
import { apiKind, oauthServerKind, requireObject, type DefinitionKind } from './definition-writes.js';
import { compileCache } from '../store/compile-cache.js';
import { basicAuthCredentialKind } from './basic-auth-credentials.js';
import { definitionJson } from '../store/journal.js';

export interface ConfigDocument {
  apis: unknown[];
  oauth_servers: unknown[];
  basic_auth_credentials: unknown[];
}

type Member = keyof ConfigDocument;

/** The document's members, in the order they are parsed and reported. */
const SECTIONS: ReadonlyArray<{ member: Member; kind: DefinitionKind<any> }> = [
  { member: 'apis', kind: apiKind },
  { member: 'oauth_servers', kind: oauthServerKind },
  { member: 'basic_auth_credentials', kind: basicAuthCredentialKind },
];

export interface KindDiff {
  added: string[];
  changed: string[];
  removed: string[];
}

export type ConfigDiff = Record<Member, KindDiff>;

/** basic_auth users as stored: username and scrypt hash (never a password: there is none to show). */
export function toConfigDocument(defs: Definitions): ConfigDocument {
  return { apis: defs.apis, oauth_servers: defs.oauthServers, basic_auth_credentials: defs.basicAuthCredentials ?? [] };
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
  const item = raw as Record<string, unknown>;
  const stored = (current.basicAuthCredentials ?? []).find((c) => c.username === item.username);
  const hash = stored && parsePasswordHash(stored.password_hash);
  if (hash && typeof item.password === 'string' && (await verifyPassword(item.password, hash))) {
    return { username: item.username, password_hash: stored!.password_hash };
  }
  return basicAuthCredentialKind.prepare!(item, 'create');
}

/** Throws the first rejection of the whole candidate, naming the item by its index. */
export function checkWholeConfig(defs: Definitions): void {
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
    throw new GatehouseError('VALIDATION_FAILED', `${unknown} is not a member of the configuration (apis, oauth_servers, basic_auth_credentials)`, { field: unknown });
  }
  let defs: Definitions = { apis: [], oauthServers: [], basicAuthCredentials: [] };
  for (const { member, kind } of SECTIONS) {
    const items = doc[member] ?? [];
    if (!Array.isArray(items)) throw new GatehouseError('VALIDATION_FAILED', `${member} must be an array`, { field: member });
    const parsed: unknown[] = [];
    for (const [index, raw] of items.entries()) {
      try {
        parsed.push(kind.parse(member === 'basic_auth_credentials' ? await resolvePassword(raw, current) : raw));
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
