/**
 * The OpenAPI document: valid OpenAPI 3.1 for a real validator, and it documents exactly the
 * routes the admin app registers (the web console's static files aside). That every documented
 * status is produced, and every produced one documented, is test/e2e/openapi.test.ts.
 */
import { Validator } from '@seriousme/openapi-schema-validator';
import { createLogger } from '#proto/logger';
import { PLUGIN_ORDER } from '#proto/plugins/index';
import { createAdminApp } from './app.js';
import { buildOpenApiDocument, OPERATIONS, statusesOf } from './openapi-document.js';

const document = buildOpenApiDocument('0.0.0-test');

interface Layer {
  route?: { path: string; methods: Record<string, boolean> };
  handle?: { stack?: Layer[] };
  slash?: boolean;
  rawPath?: string;
}

/** `METHOD /path` of every route the app registers (express 5 router stack), `:param` as `{param}`. */
function registeredRoutes(): string[] {
  const app = createAdminApp({
    store: { current: () => ({ revision: 1, defs: { apis: [], oauthServers: [] }, hash: 'h' }) } as never,
    snapshots: {} as never,
    dataPlanes: () => [],
    auth: {} as never,
    metrics: {} as never,
    logger: createLogger('control-plane', 'silent'),
  }) as unknown as { router: { stack: Layer[] } };
  const out: string[] = [];
  const walk = (stack: Layer[], prefix: string) => {
    for (const layer of stack) {
      if (layer.route) {
        const path = `${prefix}${layer.route.path}`.replace(/:(\w+)/g, '{$1}');
        for (const method of Object.keys(layer.route.methods)) if (method !== '_all') out.push(`${method.toUpperCase()} ${path}`);
      } else if (layer.handle?.stack) {
        walk(layer.handle.stack, layer.slash ? prefix : `${prefix}${layer.rawPath ?? ''}`);
      }
    }
  };
  walk(app.router.stack, '');
  return out.filter((r) => !r.includes(' /console')).sort();
}

describe('OpenAPI document', () => {
  test('is valid OpenAPI 3.1 for @seriousme/openapi-schema-validator', async () => {
    const result = await new Validator().validate(structuredClone(document) as never);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(document.openapi).toBe('3.1.0');
  });

  test('documents exactly the routes the admin app registers', () => {
    const documented = OPERATIONS.map((op) => `${op.method.toUpperCase()} ${op.path}`).sort();
    expect(documented).toEqual(registeredRoutes());
  });

  test('every operation has the Error body on each error status, and a bearer requirement unless public', () => {
    const paths = document.paths as Record<
      string,
      Record<string, { security?: unknown[]; responses: Record<string, { content?: Record<string, { schema: unknown }> }> }>
    >;
    for (const op of OPERATIONS) {
      const doc = paths[op.path][op.method];
      expect(Object.keys(doc.responses).sort()).toEqual([...Object.keys(statusesOf(op)), 'default'].sort());
      for (const status of Object.keys(statusesOf(op)).filter((s) => Number(s) >= 400 && op.path !== '/readyz')) {
        expect({ op: `${op.method} ${op.path}`, status, schema: doc.responses[status].content?.['application/json'].schema }).toEqual({
          op: `${op.method} ${op.path}`,
          status,
          schema: { $ref: '#/components/schemas/Error' },
        });
      }
      expect(doc.security).toEqual(op.public ? [] : undefined);
    }
    expect(document.security).toEqual([{ bearer: [] }]);
    expect((document.components as { securitySchemes: unknown }).securitySchemes).toEqual({
      bearer: expect.objectContaining({ type: 'http', scheme: 'bearer' }),
    });
  });

  test('request bodies come from the validating zod schemas, plugin configs from each plugin schema', () => {
    const schemas = (document.components as { schemas: Record<string, any> }).schemas;
    expect(schemas.ApiDefinitionInput.properties.name.pattern).toBe('^[A-Za-z0-9._-]{1,128}$');
    expect(schemas.ApiDefinitionInput.required).toEqual(expect.arrayContaining(['name', 'proxy']));
    const plugins = schemas.ApiDefinitionInput.properties.plugins.items.oneOf;
    expect(plugins.map((p: any) => p.properties.name.const)).toEqual(PLUGIN_ORDER);
    expect(plugins.find((p: any) => p.title === 'oauth2').properties.config.required).toEqual(['server_name']);
    expect(schemas.ExplainRequest.required).toEqual(['method', 'path']);
    expect(schemas.ApiDefinitionPatch.required).toBeUndefined();
  });
});
