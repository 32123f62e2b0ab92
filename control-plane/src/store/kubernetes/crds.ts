/**
 * The four CustomResourceDefinitions, generated from the zod schemas the admin API validates with
 * (one source of truth). `scripts/generate-crds.mjs` writes them to deploy/crds/ and the chart's
 * crds/; a test fails when the committed YAML differs from what this module generates.
 *
 * zod's JSON Schema is made structural (what the apiserver requires): no `$schema`, no `default`
 * (the CP fills defaults when it reads a CR, so a CR keeps what its author wrote), no
 * `additionalProperties: false` (unknown fields are pruned, as the admin API drops them; a map's value schema
 * stays, and its `propertyNames`, which the apiserver does not know, goes), and a member zod
 * cannot describe (`token_strategy.settings`: an object or an array) keeps any value through
 * `x-kubernetes-preserve-unknown-fields`. Patterns are rewritten for Go's RE2 (`\uXXXX` → `\x{XXXX}`).
 */
// Plain js-yaml, not client-node's dumpYaml: that one goes through the typed model and drops the
// x-kubernetes-* keys (preserve-unknown-fields, list-type) the schema depends on.
import yaml from 'js-yaml';
import { z } from 'zod';
import { apiSchema } from '#proto/definition/api-schema';
import { serverSchema } from '#proto/definition/oauth-server-schema';
import { credentialSchema } from '#proto/definition/basic-auth-credential-schema';
import { keyAuthCredentialSchema } from '#proto/definition/key-auth-credential-schema';
import { SECRET_FIELDS, type SecretKind } from '#proto/definition/secret-fields';
import { SECRET_REF_SCHEMA, SECRET_REF_SUFFIX } from './secret-refs.js';

export const GROUP = 'gatehouse.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

export interface ResourceKind {
  kind: 'ApiDefinition' | 'OAuthServer' | 'BasicAuthCredential' | 'KeyAuthCredential';
  plural: string;
  singular: string;
  shortNames: string[];
  /** Printer columns after the kind's own: Accepted, Programmed, Age. */
  columns: Array<{ name: string; jsonPath: string }>;
  schema: z.ZodType;
  /** The spec member holding the Janus name; optional in the CRD (metadata.name stands in). */
  nameField: 'name' | 'username';
  /** The definition kind of its spec (the rows of the secret-field table that apply to it). */
  definitionKind: SecretKind;
}

export const API_DEFINITION: ResourceKind = {
  kind: 'ApiDefinition',
  plural: 'apidefinitions',
  singular: 'apidefinition',
  shortNames: ['ghapi'],
  columns: [
    { name: 'Listen Path', jsonPath: '.spec.proxy.listen_path' },
    { name: 'Targets', jsonPath: '.spec.proxy.upstreams.targets[*].target' },
  ],
  schema: apiSchema,
  nameField: 'name',
  definitionKind: 'api',
};

export const OAUTH_SERVER: ResourceKind = {
  kind: 'OAuthServer',
  plural: 'oauthservers',
  singular: 'oauthserver',
  shortNames: ['ghoauth'],
  columns: [
    { name: 'Token Path', jsonPath: '.spec.oauth_endpoints.token.listen_path' },
    { name: 'Strategy', jsonPath: '.spec.token_strategy.name' },
  ],
  schema: serverSchema,
  nameField: 'name',
  definitionKind: 'oauth-server',
};

/** A global credential kind: spec `{username, <hash>}`, named by its username. */
function credentialResource(kind: 'BasicAuthCredential' | 'KeyAuthCredential', shortName: string, schema: z.ZodType, definitionKind: SecretKind): ResourceKind {
  const singular = kind.toLowerCase();
  return {
    kind,
    plural: `${singular}s`,
    singular,
    shortNames: [shortName],
    columns: [{ name: 'Username', jsonPath: '.spec.username' }],
    schema,
    nameField: 'username',
    definitionKind,
  };
}

/** A basic_auth user: spec `{username, password_hash}` (an scrypt hash; the admin API makes them). */
export const BASIC_AUTH_CREDENTIAL = credentialResource('BasicAuthCredential', 'ghbasic', credentialSchema, 'basic-auth-credential');

/** A key_auth credential: spec `{username, key_hash}` (a SHA-256 digest of the key; the admin API makes them). */
export const KEY_AUTH_CREDENTIAL = credentialResource('KeyAuthCredential', 'ghkey', keyAuthCredentialSchema, 'key-auth-credential');

export const RESOURCE_KINDS = [API_DEFINITION, OAUTH_SERVER, BASIC_AUTH_CREDENTIAL, KEY_AUTH_CREDENTIAL] as const;

type JsonSchema = Record<string, unknown>;

/** JSON Schema (zod's output) → Kubernetes structural schema, recursively. */
export function structural(schema: JsonSchema): JsonSchema {
  const keys = Object.keys(schema).filter((k) => !['$schema', 'default', 'additionalProperties', 'propertyNames'].includes(k));
  if (keys.length === 0) return { 'x-kubernetes-preserve-unknown-fields': true };
  const out: JsonSchema = {};
  const map = schema.additionalProperties;
  if (typeof map === 'object' && map !== null) out.additionalProperties = structural(map as JsonSchema);
  for (const key of keys) {
    const value = schema[key];
    if (key === 'properties') {
      out.properties = Object.fromEntries(Object.entries(value as Record<string, JsonSchema>).map(([k, v]) => [k, structural(v)]));
    } else if (key === 'items') {
      out.items = structural(value as JsonSchema);
    } else if (key === 'pattern') {
      out.pattern = (value as string).replace(/\\u([0-9a-fA-F]{4})/g, '\\x{$1}');
    } else {
      out[key] = value;
    }
  }
  return out;
}

/**
 * Each secret field of the kind (secret-fields.ts) may be given as `<field>_secret_ref` instead
 * (control-plane/src/store/kubernetes/secret-refs.ts): the ref is declared beside the field, which is
 * then no longer required. Under a member kept whole (preserve-unknown-fields) both pass as they are.
 */
function withSecretRefs(spec: JsonSchema, kind: SecretKind): JsonSchema {
  for (const row of SECRET_FIELDS) {
    if (row.kind !== kind) continue;
    let node: JsonSchema | undefined = spec;
    for (const step of row.holder) {
      if (!node || node['x-kubernetes-preserve-unknown-fields']) break;
      node = (typeof step === 'string' ? (node.properties as Record<string, JsonSchema> | undefined)?.[step] : node.items) as JsonSchema | undefined;
    }
    const properties = node?.properties as Record<string, JsonSchema> | undefined;
    if (!node || node['x-kubernetes-preserve-unknown-fields'] || !properties?.[row.field]) continue;
    properties[row.field + SECRET_REF_SUFFIX] = { ...SECRET_REF_SCHEMA, description: `${row.what}: from a Secret (instead of ${row.field})` };
    if (Array.isArray(node.required)) node.required = (node.required as string[]).filter((k) => k !== row.field);
  }
  return spec;
}

/** metav1.Condition, as Gateway API resources declare it. */
const CONDITION_SCHEMA = {
  type: 'object',
  required: ['type', 'status', 'lastTransitionTime', 'reason', 'message'],
  properties: {
    type: { type: 'string', maxLength: 316 },
    status: { type: 'string', enum: ['True', 'False', 'Unknown'] },
    observedGeneration: { type: 'integer', format: 'int64', minimum: 0 },
    lastTransitionTime: { type: 'string', format: 'date-time' },
    reason: { type: 'string', minLength: 1, maxLength: 1024 },
    message: { type: 'string', maxLength: 32768 },
  },
};

const STATUS_SCHEMA = {
  type: 'object',
  properties: {
    conditions: {
      type: 'array',
      maxItems: 8,
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['type'],
      items: CONDITION_SCHEMA,
    },
  },
};

export function customResourceDefinition(resource: ResourceKind): JsonSchema {
  const spec = withSecretRefs(structural(z.toJSONSchema(resource.schema, { io: 'input', unrepresentable: 'any' }) as JsonSchema), resource.definitionKind);
  // spec.name (spec.username) may be left out: the CP then uses metadata.name (docs/kubernetes.md "Run on Kubernetes").
  spec.required = ((spec.required ?? []) as string[]).filter((k) => k !== resource.nameField);
  // An empty list is not a valid `required` (JSON Schema: at least one item).
  if ((spec.required as string[]).length === 0) delete spec.required;
  const condition = (type: string) => `.status.conditions[?(@.type=="${type}")].status`;
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${resource.plural}.${GROUP}`,
      labels: { 'app.kubernetes.io/name': 'gatehouse', 'app.kubernetes.io/component': 'crd' },
    },
    spec: {
      group: GROUP,
      names: {
        kind: resource.kind,
        listKind: `${resource.kind}List`,
        plural: resource.plural,
        singular: resource.singular,
        shortNames: resource.shortNames,
        categories: ['gatehouse'],
      },
      scope: 'Namespaced',
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [
            ...resource.columns.map((c) => ({ ...c, type: 'string' })),
            { name: 'Accepted', type: 'string', jsonPath: condition('Accepted') },
            { name: 'Programmed', type: 'string', jsonPath: condition('Programmed') },
            { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
          ],
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description: `Gatehouse ${resource.kind}: spec is the admin API's definition (same fields, same validation).`,
              required: ['spec'],
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                spec: spec,
                status: STATUS_SCHEMA,
              },
            },
          },
        },
      ],
    },
  };
}

/** File name of each CRD in deploy/crds/ and helm/gatehouse/crds/. */
export function crdFileName(resource: ResourceKind): string {
  return `${GROUP}_${resource.plural}.yaml`;
}

export const GENERATED_HEADER = '# Generated by `npm run generate` from the definition schemas (proto/src/definition). Do not edit.\n';

export function crdYaml(resource: ResourceKind): string {
  return GENERATED_HEADER + yaml.dump(customResourceDefinition(resource), { noRefs: true, lineWidth: 160 });
}
