/**
 * Secrets of custom resources live in Kubernetes Secrets, not in the CRs' specs: each secret field of
 * proto/src/definition/secret-fields.ts may be given instead as `<field>_secret_ref: {name, key}` (as
 * cert-manager's `...SecretRef` fields are), naming a Secret of the CR's namespace and a key of its data.
 *
 * - Reading a CR: every `_secret_ref` is replaced by the Secret's value before the spec is parsed; a
 *   missing Secret or key is SECRET_REF_NOT_FOUND (the CR's status: Accepted=False, SecretNotFound).
 * - An admin write: every secret goes into one Secret per CR (`gatehouse-<kind>-<metadata.name>`, owned
 *   by the CR so it is garbage-collected with it), keyed by the secret's place
 *   (`plugins.openid_connect.config.cookie_secret`), and the spec holds the reference. A secret the CR
 *   already takes from a Secret of its own (kubectl apply) and that the write keeps keeps that reference.
 */
import type { V1Secret } from '@kubernetes/client-node';
import { GatehouseError } from '#proto/errors';
import { formatPath, isPlainObject } from '#proto/definition/field-path';
import { secretLocations, type SecretKind } from '#proto/definition/secret-fields';

export const SECRET_REF_SUFFIX = '_secret_ref';

export interface SecretRef {
  name: string;
  key: string;
}

export type SecretLookup = (name: string) => V1Secret | undefined;

/** The Secret the store keeps a CR's secrets in. Janus names make metadata.names of at most 137 characters: this stays under 253. */
export function managedSecretName(singular: string, metadataName: string): string {
  return `gatehouse-${singular}-${metadataName}`;
}

/** The JSON Schema of a `_secret_ref` member (the CRD generator's). */
export const SECRET_REF_SCHEMA = {
  type: 'object',
  description: 'A key of a Secret in this namespace holding the value (instead of the value itself).',
  required: ['name', 'key'],
  properties: { name: { type: 'string', minLength: 1, maxLength: 253 }, key: { type: 'string', minLength: 1, maxLength: 253, pattern: '^[-._a-zA-Z0-9]+$' } },
};

function isSecretRef(v: unknown): v is SecretRef {
  return isPlainObject(v) && typeof v.name === 'string' && v.name !== '' && typeof v.key === 'string' && v.key !== '';
}

function secretValue(secret: V1Secret | undefined, key: string): string | undefined {
  const data = secret?.data?.[key];
  if (data !== undefined) return Buffer.from(data, 'base64').toString('utf8');
  return secret?.stringData?.[key];
}

/**
 * `spec` with every `_secret_ref` replaced by its value, and what it read (`name@resourceVersion` of each
 * Secret, for the parse cache: a Secret's update changes it). Throws SECRET_REF_NOT_FOUND or VALIDATION_FAILED.
 */
export function resolveSecretRefs(kind: SecretKind, spec: Record<string, unknown>, lookup: SecretLookup, refs: string[]): Record<string, unknown> {
  const places = secretLocations(kind, spec).filter((l) => l.holder[l.row.field + SECRET_REF_SUFFIX] !== undefined);
  if (places.length === 0) return spec;
  const resolved = structuredClone(spec);
  for (const l of secretLocations(kind, resolved)) {
    const refField = l.row.field + SECRET_REF_SUFFIX;
    const ref = l.holder[refField];
    if (ref === undefined) continue;
    const at = formatPath([...l.path.slice(0, -1), refField]);
    if (!isSecretRef(ref)) throw new GatehouseError('VALIDATION_FAILED', `${at} must be {name, key}`, { field: at });
    if (l.holder[l.row.field] !== undefined)
      throw new GatehouseError('VALIDATION_FAILED', `${at}: give ${l.row.field} or ${refField}, not both`, { field: at });
    const secret = lookup(ref.name);
    refs.push(`${ref.name}@${secret?.metadata?.resourceVersion ?? ''}`);
    const value = secretValue(secret, ref.key);
    if (value === undefined) {
      const missing = secret ? `Secret "${ref.name}" has no key "${ref.key}"` : `Secret "${ref.name}" does not exist in this namespace`;
      throw new GatehouseError('SECRET_REF_NOT_FOUND', `${at}: ${missing}`, { field: at });
    }
    delete l.holder[refField];
    l.holder[l.row.field] = value;
  }
  return resolved;
}

/**
 * The spec an admin write puts in the CR for `def` (a stored definition, secrets in it), and the Secret
 * data it needs (empty: none). `current`: the CR's spec now, whose references to other Secrets are kept
 * where the secret is unchanged.
 */
export function extractSecrets(
  kind: SecretKind,
  def: object,
  current: Record<string, unknown> | undefined,
  lookup: SecretLookup,
  managedName: string,
): { spec: Record<string, unknown>; data: Record<string, string> } {
  const kept = new Map<string, SecretRef>();
  for (const l of current ? secretLocations(kind, current) : []) {
    const ref = l.holder[l.row.field + SECRET_REF_SUFFIX];
    if (isSecretRef(ref) && ref.name !== managedName) {
      const value = secretValue(lookup(ref.name), ref.key);
      if (value !== undefined) kept.set(`${l.id}\0${value}`, { name: ref.name, key: ref.key });
    }
  }
  const spec = structuredClone(def) as Record<string, unknown>;
  const data: Record<string, string> = {};
  for (const l of secretLocations(kind, spec)) {
    const value = l.holder[l.row.field];
    if (typeof value !== 'string') continue;
    const ref = kept.get(`${l.id}\0${value}`) ?? { name: managedName, key: l.id };
    if (ref.name === managedName) data[l.id] = Buffer.from(value, 'utf8').toString('base64');
    delete l.holder[l.row.field];
    l.holder[l.row.field + SECRET_REF_SUFFIX] = ref;
  }
  return { spec, data };
}
