/**
 * The OpenAPI 3.1 document of the admin API (`GET /openapi.json`). Request bodies come from the zod
 * schemas the API validates with (z.toJSONSchema, as the CRDs do): definitions as written (input)
 * and as stored and shown (output), each plugin's `config` from its own schema in proto/src/plugins.
 * Every operation lists each status it can return; the generic ones follow from its flags
 * (authenticated → 401, store write → 403 for a viewer and 503 when the store is down, JSON body →
 * 400 and 413). openapi.test.ts checks the document with an OpenAPI validator, and
 * test/e2e/openapi.e2e.test.ts drives a real control plane through every (operation, status) pair.
 */
import { REDACTED, SECRET_FIELDS, type SecretKind } from '#proto/definition/secret-fields';
import { z } from 'zod';
import { apiSchema } from '#proto/definition/api-schema';
import { serverSchema } from '#proto/definition/oauth-server-schema';
import { passwordSchema, usernameSchema } from '#proto/definition/basic-auth-credential-schema';
import { groupListSchema, MAX_CREDENTIAL_GROUPS } from '#proto/definition/credential-schema';
import { apiKeySchema } from '#proto/definition/key-auth-credential-schema';
import { PLUGINS, PLUGIN_ORDER } from '#proto/plugins/index';
import { LOSS_REASONS } from '#proto/routing/index';
import { explainBodySchema } from './explain-route.js';
import { MAX_PAGE_SIZE } from './pagination.js';

type JsonSchema = Record<string, unknown>;
type Io = 'input' | 'output';

/** zod → JSON Schema (2020-12, OpenAPI 3.1's dialect), without the per-schema `$schema`. */
function jsonSchema(schema: z.ZodType, io: Io): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as JsonSchema;
  return rest;
}

const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });

/** The `plugins` items: one alternative per plugin, its `config` checked by that plugin's schema. */
function pluginItems(io: Io): JsonSchema {
  return {
    description: `Plugins run in this order, whatever order they are listed in: ${PLUGIN_ORDER.join(', ')}.`,
    oneOf: PLUGIN_ORDER.map((name) => ({
      type: 'object',
      title: name,
      required: io === 'input' ? ['name'] : ['name', 'enabled', 'config'],
      properties: {
        name: { const: name },
        enabled: { type: 'boolean', ...(io === 'input' ? { default: true } : {}) },
        config: jsonSchema(PLUGINS[name].schema, io),
      },
    })),
  };
}

function apiDefinitionSchema(io: Io): JsonSchema {
  const schema = jsonSchema(apiSchema, io);
  const properties = schema.properties as Record<string, JsonSchema>;
  properties.plugins = { ...properties.plugins, items: pluginItems(io) };
  if (io === 'output') {
    // Shown with defaults filled (docs/admin-api.md "Administration API"): hosts folded from proxy.hosts, methods ["ALL"] when absent.
    schema.required = [...(schema.required as string[]), 'hosts'];
    const proxy = properties.proxy.properties as Record<string, JsonSchema>;
    delete proxy.hosts;
  }
  return schema;
}

/** A merge patch (RFC 7396) of a definition: the same members, none required; `null` removes one. */
function patchOf(schema: JsonSchema): JsonSchema {
  const { required: _required, ...rest } = schema;
  return { ...rest, description: 'JSON merge patch (RFC 7396) onto the stored definition; the result must be valid as a whole.' };
}

const loginResponse = z.object({ access_token: z.string(), token_type: z.literal('Bearer'), expires_in: z.int() });

const dataPlane = z.object({
  id: z.string(),
  hostname: z.string(),
  address: z.string(),
  proxy_address: z.string(),
  software_version: z.string(),
  auth: z.unknown(),
  connected_since: z.string(),
  version: z.int().nullable(),
  hash: z.string().nullable(),
  last_ack: z.object({ version: z.int(), at: z.string() }).nullable(),
  last_nack: z.object({ version: z.int(), error: z.string(), at: z.string() }).nullable(),
  allow_short_hmac_keys: z
    .literal(true)
    .optional()
    .describe('present when the control plane runs with ALLOW_SHORT_HMAC_KEYS=true: HS keys shorter than 32 bytes (RFC 7518 §3.2) are accepted'),
});

const snapshotRef = z.object({ version: z.int(), hash: z.string() });

const explainedRoute = z.object({
  kind: z.enum(['api', 'oauth-endpoint']),
  name: z.string(),
  endpoint: z.string().optional(),
  listen_path: z.string().nullable(),
  hosts: z.array(z.string()),
  methods: z.array(z.string()),
  match_headers: z.record(z.string(), z.array(z.string())).optional(),
});

const explainResponse = z.object({
  snapshot: snapshotRef,
  request: z.object({ method: z.string(), host: z.string().nullable(), path: z.string(), query: z.string() }),
  route: explainedRoute.extend({ params: z.record(z.string(), z.string()), matched_path: z.string() }).nullable(),
  upstreams: z.array(
    z.object({ target: z.string(), weight: z.int(), url: z.string().nullable(), host_header: z.string().nullable(), error: z.string().optional() }),
  ),
  plugins: z.array(z.enum(PLUGIN_ORDER as [string, ...string[]])),
  candidates: z.array(
    explainedRoute.extend({
      active: z.boolean(),
      reasons: z.array(z.enum(LOSS_REASONS)),
      details: z.array(z.string()),
      outranked_by: z
        .object({
          kind: z.enum(['api', 'oauth-endpoint']),
          name: z.string(),
          endpoint: z.string().optional(),
          rule: z.enum(['longer_prefix', 'more_conditions', 'exact_listen_path', 'name_order', 'id_order']),
        })
        .optional(),
    }),
  ),
  refused: z.object({ code: z.literal('AMBIGUOUS_PATH'), message: z.string() }).optional(),
});

const kindDiff = z.object({ added: z.array(z.string()), changed: z.array(z.string()), removed: z.array(z.string()) });
const configDiff = z.object({ apis: kindDiff, oauth_servers: kindDiff, basic_auth_credentials: kindDiff, key_auth_credentials: kindDiff });

/** Which members are write-only (secret-fields.ts): shown as the marker, and the marker written back keeps them. */
function secretsNote(kinds: SecretKind[]): string {
  const fields = SECRET_FIELDS.filter((f) => kinds.includes(f.kind)).map((f) => `${f.field} (${f.what})`);
  return `Write-only secrets, shown as "${REDACTED}": ${fields.join('; ')}. A write carrying "${REDACTED}" in their place keeps the stored secret.`;
}

/** A credential as the configuration document holds it: username, the named hash and the groups, if any. */
const storedCredential = (hashField: string): JsonSchema => ({
  type: 'array',
  items: {
    type: 'object',
    required: ['username', hashField],
    properties: { username: { type: 'string' }, [hashField]: { type: 'string' }, groups: { type: 'array', items: { type: 'string' } } },
  },
});

function schemas(): Record<string, JsonSchema> {
  const credentialView = z.object({
    username: usernameSchema,
    groups: groupListSchema(MAX_CREDENTIAL_GROUPS)
      .optional()
      .describe("the consumer's groups, which the acl plugin authorizes by (lower-cased, deduplicated, sorted)"),
  });
  return {
    Error: { type: 'object', required: ['error'], properties: { error: { type: 'string' } } },
    LoginRequest: jsonSchema(z.object({ username: z.string(), password: z.string() }), 'input'),
    LoginResponse: jsonSchema(loginResponse, 'output'),
    ApiDefinitionInput: apiDefinitionSchema('input'),
    ApiDefinitionPatch: patchOf(apiDefinitionSchema('input')),
    ApiDefinition: { ...apiDefinitionSchema('output'), description: secretsNote(['api']) },
    OAuthServerInput: jsonSchema(serverSchema, 'input'),
    OAuthServerPatch: patchOf(jsonSchema(serverSchema, 'input')),
    OAuthServer: { ...jsonSchema(serverSchema, 'output'), description: secretsNote(['oauth-server']) },
    BasicAuthUserInput: jsonSchema(credentialView.extend({ password: passwordSchema }), 'input'),
    BasicAuthUserPatch: patchOf(jsonSchema(credentialView.extend({ password: passwordSchema }), 'input')),
    BasicAuthUser: jsonSchema(credentialView, 'output'),
    KeyAuthCredentialInput: jsonSchema(
      credentialView.extend({ key: apiKeySchema.optional().describe('the API key; a create without one gets a generated key (32 random bytes, base64url)') }),
      'input',
    ),
    KeyAuthCredentialPatch: patchOf(jsonSchema(credentialView.extend({ key: apiKeySchema }), 'input')),
    KeyAuthCredential: jsonSchema(credentialView, 'output'),
    KeyAuthCredentialCreated: jsonSchema(
      credentialView.extend({ key: z.string().optional().describe('the generated API key: in this response only, never shown again') }),
      'output',
    ),
    DataPlane: jsonSchema(dataPlane, 'output'),
    ExplainRequest: jsonSchema(explainBodySchema, 'input'),
    ExplainResponse: jsonSchema(explainResponse, 'output'),
    ConfigDocument: {
      type: 'object',
      description: `The whole configuration; what GET /config returns, PUT /config accepts unchanged. ${secretsNote(['api', 'oauth-server', 'basic-auth-credential', 'key-auth-credential'])}`,
      required: ['apis', 'oauth_servers', 'basic_auth_credentials', 'key_auth_credentials'],
      properties: {
        apis: { type: 'array', items: ref('ApiDefinition') },
        oauth_servers: { type: 'array', items: ref('OAuthServer') },
        basic_auth_credentials: storedCredential('password_hash'),
        key_auth_credentials: storedCredential('key_hash'),
      },
    },
    ConfigChange: jsonSchema(z.object({ version: z.int(), changed: z.boolean(), diff: configDiff, restored: z.int().optional() }), 'output'),
    ConfigDryRun: jsonSchema(z.object({ dry_run: z.literal(true), version: z.int(), diff: configDiff }), 'output'),
    HistoryEntry: jsonSchema(
      z.object({
        version: z.int(),
        time: z.string(),
        hash: z.string(),
        author: z.string(),
        action: z.string(),
        user_agent: z.string().optional(),
        apis: z.int(),
        oauth_servers: z.int(),
        basic_auth_credentials: z.int(),
        key_auth_credentials: z.int().optional(),
      }),
      'output',
    ),
    Ready: jsonSchema(z.object({ ready: z.boolean(), error: z.string().optional(), snapshot: snapshotRef }), 'output'),
  };
}

/** How one operation is documented; the generic statuses follow from the flags. */
export interface OperationSpec {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** OpenAPI form: `/apis/{name}`. */
  path: string;
  summary: string;
  /** No token needed. */
  public?: boolean;
  /** Changes the store: 403 for a viewer, 503 when the store is unavailable. */
  write?: boolean;
  /** Component name of the JSON request body (400 malformed, 413 over 1 MiB). */
  body?: string;
  success: { status: number; description: string; schema?: JsonSchema; contentType?: string };
  /** Statuses particular to the operation (rendered with the Error body). */
  errors?: Record<number, string>;
  parameters?: JsonSchema[];
}

/** pagination.ts */
const pageParameters: JsonSchema[] = [
  {
    name: 'limit',
    in: 'query',
    required: false,
    schema: { type: 'integer', minimum: 1, maximum: MAX_PAGE_SIZE },
    description: 'a page of this many items (100 when only after is given)',
  },
  {
    name: 'after',
    in: 'query',
    required: false,
    schema: { type: 'string' },
    description: 'the items whose names sort after this one (the last name of the previous page)',
  },
];
const nameParam = (description: string): JsonSchema => ({ name: 'name', in: 'path', required: true, schema: { type: 'string' }, description });
const secretsParam: JsonSchema = {
  name: 'secrets',
  in: 'query',
  required: false,
  schema: { type: 'string', enum: ['include'] },
  description: `include: the secrets as stored (admin only; logged), else each is shown as "${REDACTED}"`,
};
const versionParam: JsonSchema = {
  name: 'version',
  in: 'path',
  required: true,
  schema: { type: 'string', pattern: '^[0-9]+$' },
  description: 'a version listed by GET /config/history',
};

/** CRUD of one definition kind (definition-routes.ts). */
function resourceOperations(o: {
  path: string;
  noun: string;
  input: string;
  patch: string;
  shown: string;
  /** What a create answers, when it differs from `shown`. */
  created?: string;
  conflicts: string;
  updateConflicts?: string;
  deleteConflict?: string;
  param: string;
}): OperationSpec[] {
  const item = `${o.path}/{name}`;
  const parameters = [nameParam(o.param)];
  const notFound = { 404: `${o.noun} not found` };
  const update = (method: 'put' | 'patch'): OperationSpec => ({
    method,
    path: item,
    summary: `Update ${o.noun} (JSON merge patch)`,
    write: true,
    body: o.patch,
    parameters,
    success: { status: 200, description: `the stored ${o.noun}`, schema: ref(o.shown) },
    errors: o.updateConflicts ? { ...notFound, 409: o.updateConflicts } : notFound,
  });
  return [
    {
      method: 'get',
      path: o.path,
      summary: `List ${o.noun}s`,
      parameters: pageParameters,
      success: {
        status: 200,
        description: `every ${o.noun}; with limit or after, one page in name order (X-Total-Count: all of them; Link rel="next" while more remain)`,
        schema: { type: 'array', items: ref(o.shown) },
      },
      errors: { 400: `limit is not a whole number from 1 to ${MAX_PAGE_SIZE}` },
    },
    {
      method: 'post',
      path: o.path,
      summary: `Create ${o.noun}`,
      write: true,
      body: o.input,
      success: { status: 201, description: `the stored ${o.noun} (Location: its URL)`, schema: ref(o.created ?? o.shown) },
      errors: { 409: o.conflicts },
    },
    {
      method: 'get',
      path: item,
      summary: `Get ${o.noun}`,
      parameters,
      success: { status: 200, description: `the ${o.noun}`, schema: ref(o.shown) },
      errors: notFound,
    },
    update('put'),
    update('patch'),
    {
      method: 'delete',
      path: item,
      summary: `Delete ${o.noun}`,
      write: true,
      parameters,
      success: { status: 204, description: 'deleted' },
      errors: o.deleteConflict ? { ...notFound, 409: o.deleteConflict } : notFound,
    },
  ];
}

/** Every admin route (app.ts and the routers it mounts), except the web console's static files. */
export const OPERATIONS: readonly OperationSpec[] = [
  {
    method: 'get',
    path: '/healthz',
    summary: 'Liveness',
    public: true,
    success: { status: 200, description: 'alive', schema: { type: 'object', properties: { status: { const: 'ok' } } } },
  },
  {
    method: 'get',
    path: '/readyz',
    summary: 'Readiness: the store is reachable',
    public: true,
    success: { status: 200, description: 'ready', schema: ref('Ready') },
    errors: { 503: 'store unreachable (body: Ready with ready false)' },
  },
  {
    method: 'get',
    path: '/metrics',
    summary: 'Prometheus metrics',
    public: true,
    success: { status: 200, description: 'Prometheus text format', contentType: 'text/plain' },
  },
  {
    method: 'get',
    path: '/openapi.json',
    summary: 'This document',
    public: true,
    success: { status: 200, description: 'OpenAPI 3.1 document', schema: { type: 'object' } },
  },
  {
    method: 'post',
    path: '/login',
    summary: 'Exchange admin credentials for a bearer token',
    public: true,
    body: 'LoginRequest',
    success: { status: 200, description: 'a token', schema: ref('LoginResponse') },
    errors: { 401: 'wrong user name or password', 429: 'too many failed logins (Retry-After)' },
  },
  ...resourceOperations({
    path: '/apis',
    noun: 'API definition',
    input: 'ApiDefinitionInput',
    patch: 'ApiDefinitionPatch',
    shown: 'ApiDefinition',
    param: 'API name',
    conflicts: '`api name is already registered` or `api listen path is already registered`',
    updateConflicts: '`api listen path is already registered`',
  }),
  ...resourceOperations({
    path: '/oauth/servers',
    noun: 'OAuth server',
    input: 'OAuthServerInput',
    patch: 'OAuthServerPatch',
    shown: 'OAuthServer',
    param: 'OAuth server name',
    conflicts: '`oauth server name is already registered` or an endpoint listen path taken',
    updateConflicts: 'an endpoint listen path taken',
    deleteConflict: "an API's oauth2 plugin references the server",
  }),
  ...resourceOperations({
    path: '/credentials/basic_auth',
    noun: 'basic_auth user',
    input: 'BasicAuthUserInput',
    patch: 'BasicAuthUserPatch',
    shown: 'BasicAuthUser',
    param: 'user name',
    conflicts: '`user already exists`',
  }),
  ...resourceOperations({
    path: '/credentials/key_auth',
    noun: 'key_auth credential',
    input: 'KeyAuthCredentialInput',
    patch: 'KeyAuthCredentialPatch',
    shown: 'KeyAuthCredential',
    created: 'KeyAuthCredentialCreated',
    param: 'user name',
    conflicts: '`key_auth credential already exists` or `api key is already registered`',
    updateConflicts: '`api key is already registered`',
  }),
  {
    method: 'get',
    path: '/dataplanes',
    summary: 'Connected data planes',
    success: { status: 200, description: 'one entry per stream', schema: { type: 'array', items: ref('DataPlane') } },
  },
  {
    method: 'post',
    path: '/explain',
    summary: "Which API would serve a request, and why the others lost (the data plane's own router on the current snapshot)",
    body: 'ExplainRequest',
    success: { status: 200, description: 'the explanation', schema: ref('ExplainResponse') },
  },
  {
    method: 'get',
    path: '/config',
    summary: `Export the whole configuration (secrets shown as "${REDACTED}" unless ?secrets=include); its ETag is the version, for PUT's If-Match`,
    parameters: [secretsParam],
    success: { status: 200, description: 'the configuration', schema: ref('ConfigDocument') },
    errors: { 400: 'secrets is not "include"', 403: 'secrets=include with a viewer token' },
  },
  {
    method: 'put',
    path: '/config',
    summary: 'Replace the whole configuration atomically (`?dry_run=true`: the diff only)',
    write: true,
    body: 'ConfigDocument',
    parameters: [
      { name: 'dry_run', in: 'query', required: false, schema: { type: 'string', enum: ['true', 'false'] } },
      {
        name: 'If-Match',
        in: 'header',
        required: false,
        description: 'the ETag of GET /config (`"<version>"`): refused with 412 CONFIG_CHANGED when the configuration has moved on',
        schema: { type: 'string' },
      },
    ],
    success: {
      status: 200,
      description: 'the new version and the diff (dry run: ConfigDryRun)',
      schema: { oneOf: [ref('ConfigChange'), ref('ConfigDryRun')] },
    },
    errors: { 412: 'If-Match names a version the configuration has moved on from (CONFIG_CHANGED)' },
  },
  {
    method: 'get',
    path: '/config/history',
    summary: 'Kept versions, newest first',
    success: { status: 200, description: 'the history', schema: { type: 'array', items: ref('HistoryEntry') } },
  },
  {
    method: 'get',
    path: '/config/history/{version}',
    summary: 'One kept version (secrets as GET /config)',
    parameters: [versionParam, secretsParam],
    success: { status: 200, description: 'its configuration', schema: ref('ConfigDocument') },
    errors: { 400: 'secrets is not "include"', 403: 'secrets=include with a viewer token', 404: 'version not kept' },
  },
  {
    method: 'post',
    path: '/config/rollback/{version}',
    summary: 'Restore a kept version (a new version itself)',
    write: true,
    parameters: [versionParam],
    success: { status: 200, description: 'the new version and the diff', schema: ref('ConfigChange') },
    errors: { 404: 'version not kept' },
  },
];

/** Every status an operation is documented with, generic ones included, ascending. */
export function statusesOf(op: OperationSpec): Record<number, string> {
  const out: Record<number, string> = { [op.success.status]: op.success.description };
  if (op.body) Object.assign(out, { 400: 'invalid body: the message names the field', 413: 'body over 1 MiB' });
  if (!op.public) out[401] = 'missing, malformed, expired or badly signed token';
  if (op.write) Object.assign(out, { 403: 'read-only (viewer) token', 503: 'store unavailable' });
  return { ...out, ...op.errors };
}

function operation(op: OperationSpec): JsonSchema {
  const responses: Record<string, JsonSchema> = {};
  for (const [status, description] of Object.entries(statusesOf(op))) {
    if (Number(status) === op.success.status) {
      const { schema, contentType = 'application/json' } = op.success;
      responses[status] = {
        description,
        ...(schema || contentType !== 'application/json' ? { content: { [contentType]: { schema: schema ?? { type: 'string' } } } } : {}),
      };
    } else {
      const schema = op.path === '/readyz' ? ref('Ready') : ref('Error');
      responses[status] = { description, content: { 'application/json': { schema } } };
    }
  }
  responses.default = { description: 'unexpected failure (500)', content: { 'application/json': { schema: ref('Error') } } };
  return {
    summary: op.summary,
    operationId: `${op.method}${op.path.replace(/[{}]/g, '').replace(/[/._]+(\w)/g, (_m, c: string) => c.toUpperCase())}`,
    ...(op.public ? { security: [] } : {}),
    ...(op.parameters ? { parameters: op.parameters } : {}),
    ...(op.body ? { requestBody: { required: true, content: { 'application/json': { schema: ref(op.body) } } } } : {}),
    responses,
  };
}

export function buildOpenApiDocument(version: string): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const op of OPERATIONS) (paths[op.path] ??= {})[op.method] = operation(op);
  return {
    openapi: '3.1.0',
    info: {
      title: 'Gatehouse admin API',
      version,
      description: 'Administration API of the Gatehouse control plane. Errors are `{"error": message}` with Content-Type application/json.',
    },
    security: [{ bearer: [] }],
    paths,
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'a token from POST /login' } },
      schemas: schemas(),
    },
  };
}
