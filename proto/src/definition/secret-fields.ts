/**
 * Every secret a definition holds, in one closed table: what the admin API never shows (it shows
 * REDACTED instead), what a write carrying REDACTED keeps from the stored definition, and what the
 * Kubernetes store keeps in a Secret rather than in a custom resource. A secret field added to a
 * schema without a row here is readable by every viewer: the row comes with the field.
 */
import { isPlainObject, validationError } from './field-path.js';

/** What reads show in place of a secret. A fixed marker, not a digest: a digest of a short HS key or client secret can be brute-forced offline. */
export const REDACTED = '<redacted>';

export type SecretKind = 'api' | 'oauth-server' | 'basic-auth-credential' | 'key-auth-credential';

/** A member name, or every element of an array (those matching `where`; identified by their `by` member, else by index). */
export type SecretStep = string | { each: true; where?: Readonly<Record<string, readonly string[]>>; by?: string };

export interface SecretField {
  kind: SecretKind;
  /** The path from the definition to the object holding the secret. */
  holder: readonly SecretStep[];
  field: string;
  /** What the secret is (docs and errors). */
  what: string;
}

const OIDC_PLUGIN: SecretStep = { each: true, where: { name: ['openid_connect'] }, by: 'name' };

export const SECRET_FIELDS: readonly SecretField[] = Object.freeze([
  { kind: 'api', holder: ['plugins', OIDC_PLUGIN, 'config'], field: 'client_secret', what: "openid_connect: the gateway's client secret at the provider" },
  { kind: 'api', holder: ['plugins', OIDC_PLUGIN, 'config'], field: 'cookie_secret', what: 'openid_connect: the key of the session cookies' },
  // RS and ES keys are public keys: shown as they are.
  {
    kind: 'oauth-server',
    holder: ['token_strategy', 'settings', { each: true, where: { alg: ['HS256', 'HS384', 'HS512'] } }],
    field: 'key',
    what: 'jwt: an HS shared key',
  },
  {
    kind: 'oauth-server',
    holder: ['token_strategy', 'settings'],
    field: 'client_secret',
    what: "introspection: the gateway's client secret at the introspection endpoint",
  },
  { kind: 'basic-auth-credential', holder: [], field: 'password_hash', what: "basic_auth: the user's password hash" },
  { kind: 'key-auth-credential', holder: [], field: 'key_hash', what: "key_auth: the API key's hash" },
] satisfies SecretField[]);

/** One place a definition holds (or may hold) a secret. */
export interface SecretLocation {
  row: SecretField;
  /** The object the secret is a member of (the definition's own object: writing to it writes to the definition). */
  holder: Record<string, unknown>;
  /** Stable name of the place (`plugins.openid_connect.config.client_secret`, `token_strategy.settings.0.key`): the same place in another version of the definition. */
  id: string;
  /** Path from the definition to the secret, for error messages (`plugins[2].config.client_secret`). */
  path: Array<string | number>;
}

/** Every object of `def` that a row of `kind` names (whether or not it holds the secret now). */
export function secretLocations(kind: SecretKind, def: unknown): SecretLocation[] {
  const out: SecretLocation[] = [];
  for (const row of SECRET_FIELDS) {
    if (row.kind !== kind) continue;
    const walk = (node: unknown, steps: readonly SecretStep[], id: string[], path: Array<string | number>): void => {
      if (steps.length === 0) {
        if (isPlainObject(node)) out.push({ row, holder: node, id: [...id, row.field].join('.'), path: [...path, row.field] });
        return;
      }
      const [step, ...rest] = steps;
      if (typeof step === 'string') {
        if (isPlainObject(node)) walk(node[step], rest, [...id, step], [...path, step]);
        return;
      }
      if (!Array.isArray(node)) return;
      node.forEach((item, i) => {
        if (!isPlainObject(item)) return;
        if (step.where && !Object.entries(step.where).every(([k, values]) => values.includes(item[k] as string))) return;
        walk(item, rest, [...id, step.by ? String(item[step.by]) : String(i)], [...path, i]);
      });
    };
    walk(def, row.holder, [], []);
  }
  return out;
}

const hasSecret = (l: SecretLocation) => typeof l.holder[l.row.field] === 'string';

/** `def` as reads show it: a copy with every secret REDACTED (`def` itself when it holds none). */
export function redactSecrets<T>(kind: SecretKind, def: T): T {
  if (!secretLocations(kind, def).some(hasSecret)) return def;
  const copy = structuredClone(def);
  for (const l of secretLocations(kind, copy)) if (hasSecret(l)) l.holder[l.row.field] = REDACTED;
  return copy;
}

/**
 * A write's body with every REDACTED secret replaced by the stored definition's secret at the same
 * place (so a definition read, edited and written back keeps its secrets). A REDACTED with no stored
 * secret to keep is left for refuseRedacted to name.
 */
export function keepRedactedSecrets<T>(kind: SecretKind, body: T, stored: unknown): T {
  const redacted = secretLocations(kind, body).filter((l) => l.holder[l.row.field] === REDACTED);
  if (redacted.length === 0 || stored === undefined) return body;
  const storedById = new Map(
    secretLocations(kind, stored)
      .filter(hasSecret)
      .map((l) => [l.id, l.holder[l.row.field]]),
  );
  const copy = structuredClone(body);
  for (const l of secretLocations(kind, copy)) {
    if (l.holder[l.row.field] === REDACTED && storedById.has(l.id)) l.holder[l.row.field] = storedById.get(l.id);
  }
  return copy;
}

/** Refuses a definition holding REDACTED as a secret: the marker is never a secret, only a request to keep one. */
export function refuseRedacted<T>(kind: SecretKind, def: T): T {
  const left = secretLocations(kind, def).find((l) => l.holder[l.row.field] === REDACTED);
  if (left) throw validationError(left.path, `is ${REDACTED}, but there is no stored secret at that place to keep: give the secret`);
  return def;
}
