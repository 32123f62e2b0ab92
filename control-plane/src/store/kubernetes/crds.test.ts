import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { RESOURCE_KINDS, crdFileName, crdYaml, customResourceDefinition, structural } from './crds.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');

describe('committed CRDs equal the ones generated from the definition schemas', () => {
  test.each(RESOURCE_KINDS.flatMap((r) => ['deploy/crds', 'helm/gatehouse/crds'].map((dir) => [join(dir, crdFileName(r)), r] as const)))(
    '%s (run `npm run generate` after changing a schema)',
    (path, resource) => {
      expect(readFileSync(join(root, path), 'utf8')).toBe(crdYaml(resource));
    },
  );
});

describe('structural schema', () => {
  test.each<[string, Record<string, unknown>, Record<string, unknown>]>([
    ['defaults and $schema dropped', { $schema: 'x', type: 'boolean', default: true }, { type: 'boolean' }],
    ['a member zod cannot describe keeps any value', {}, { 'x-kubernetes-preserve-unknown-fields': true }],
    ['additionalProperties dropped (unknown fields are pruned)', { type: 'object', additionalProperties: false }, { type: 'object' }],
    [
      'a map keeps its value schema, without propertyNames (the apiserver has none)',
      { type: 'object', propertyNames: { type: 'string' }, additionalProperties: { type: 'string', pattern: '^\\u0041$', default: 'A' } },
      { type: 'object', additionalProperties: { type: 'string', pattern: '^\\x{0041}$' } },
    ],
    ['JS \\u escapes become RE2 \\x{}', { type: 'string', pattern: '^[^\\s\\u0000-\\u001f]+$' }, { type: 'string', pattern: '^[^\\s\\x{0000}-\\x{001f}]+$' }],
    [
      'nested properties and items',
      { type: 'array', items: { type: 'object', properties: { a: { default: 1, type: 'integer' } } } },
      { type: 'array', items: { type: 'object', properties: { a: { type: 'integer' } } } },
    ],
  ])('%s', (_name, input, expected) => {
    expect(structural(input)).toEqual(expected);
  });
});

test('the ApiDefinition spec carries the admin validation rules that a schema can state', () => {
  const crd = customResourceDefinition(RESOURCE_KINDS[0]) as any;
  const spec = crd.spec.versions[0].schema.openAPIV3Schema.properties.spec;
  expect(spec.required).toEqual(['proxy']); // spec.name falls back to metadata.name
  expect(spec.properties.name.pattern).toBe('^[A-Za-z0-9._-]{1,128}$');
  expect(spec.properties.proxy.properties.upstreams.properties.targets.items.properties.weight).toEqual({ type: 'integer', minimum: 1, maximum: 1000 });
  expect(crd.spec.versions[0].subresources).toEqual({ status: {} });
});

test('token_strategy.settings (object or array) keeps any value', () => {
  const crd = customResourceDefinition(RESOURCE_KINDS[1]) as any;
  const strategy = crd.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.token_strategy;
  expect(strategy.properties.settings).toEqual({ 'x-kubernetes-preserve-unknown-fields': true });
  expect(strategy.properties.name.enum).toEqual(['jwt', 'storage', 'introspection']);
});
