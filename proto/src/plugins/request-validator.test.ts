import { parseApiDefinition } from '../definition/index.js';
import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';
import { requestValidatorPlugin } from './request-validator.js';

const withValidator = (config: unknown) => ({
  name: 'v',
  proxy: { listen_path: '/v/*', upstreams: { targets: [{ target: 'http://u' }] } },
  plugins: [{ name: 'request_validator', config }],
});
const SCHEMA = { type: 'object', properties: { id: { type: 'integer' } }, required: ['id'] };

test('stored with its defaults filled and content types normalised; the schema as written', () => {
  expect(parseApiDefinition(withValidator({ body_schema: SCHEMA })).plugins[0]!.config).toEqual({
    body_schema: SCHEMA,
    allowed_content_types: ['application/json'],
    max_body_bytes: 1024 * 1024,
    body_required: false,
  });
  const config = parseApiDefinition(withValidator({ body_schema: SCHEMA, allowed_content_types: 'Application/JSON, application/*+json, application/json' }))
    .plugins[0]!.config;
  expect(config).toMatchObject({ allowed_content_types: ['application/json', 'application/*+json'] });
});

test('compiled: the schema to one validator (draft 2020-12 keywords, formats), the content types to media ranges', () => {
  const compiled = requestValidatorPlugin.compile(
    parseApiDefinition(
      withValidator({
        body_schema: { type: 'object', properties: { at: { $ref: '#/$defs/time' } }, $defs: { time: { type: 'string', format: 'date-time' } } },
      }),
    ).plugins[0]!.config as never,
  );
  expect(compiled.validate({ at: '2026-11-26T10:00:00Z' })).toBe(true);
  expect(compiled.validate({ at: 'yesterday' })).toBe(false);
  expect(compiled.validate.errors![0]).toMatchObject({ instancePath: '/at', message: 'must match format "date-time"' });
  expect([...compiled.contentTypes.exactTypes]).toEqual(['application/json']);
});

test('the same $id under two APIs compiles twice: no schema is left registered in the shared ajv', () => {
  const schema = { $id: 'https://schemas.example/order', type: 'object' };
  const first = parseApiDefinition(withValidator({ body_schema: schema }));
  const second = parseApiDefinition({ ...withValidator({ body_schema: schema }), name: 'w' });
  expect(requestValidatorPlugin.compile(first.plugins[0]!.config as never).validate({})).toBe(true);
  expect(requestValidatorPlugin.compile(second.plugins[0]!.config as never).validate([])).toBe(false);
});

const invalidSchema = 'plugins[0].config.body_schema is not a valid JSON Schema (draft 2020-12): ';
test.each([
  ['body_schema missing', {}, 'plugins[0].config.body_schema is required'],
  ['body_schema not an object', { body_schema: true }, 'plugins[0].config.body_schema must be an object'],
  ['an unknown keyword', { body_schema: { type: 'string', minLenght: 1 } }, `${invalidSchema}strict mode: unknown keyword: "minLenght"`],
  [
    'properties without type object',
    { body_schema: { properties: { a: {} } } },
    `${invalidSchema}strict mode: missing type "object" for keyword "properties" at "#" (strictTypes)`,
  ],
  ['a keyword of the wrong type', { body_schema: { type: 'object', required: 'id' } }, `${invalidSchema}schema is invalid: data/required must be array`],
  [
    'a pattern that is no regular expression',
    { body_schema: { type: 'string', pattern: '(' } },
    `${invalidSchema}Invalid regular expression: /(/u: Unterminated group`,
  ],
  [
    'a remote $ref',
    { body_schema: { $ref: 'https://schemas.example/x.json' } },
    `${invalidSchema}can't resolve reference https://schemas.example/x.json from id #`,
  ],
  [
    'another draft',
    { body_schema: { $schema: 'http://json-schema.org/draft-07/schema#' } },
    `${invalidSchema}no schema with key or ref "http://json-schema.org/draft-07/schema#"`,
  ],
  [
    'a schema over 64 KiB',
    { body_schema: { type: 'string', enum: Array.from({ length: 7000 }, (_, i) => `value-${i}`) } },
    'plugins[0].config.body_schema is over 65536 bytes serialized',
  ],
  ['max_body_bytes over 8 MiB', { body_schema: SCHEMA, max_body_bytes: 8 * 1024 * 1024 + 1 }, 'plugins[0].config.max_body_bytes must be at most 8388608'],
  ['max_body_bytes 0', { body_schema: SCHEMA, max_body_bytes: 0 }, 'plugins[0].config.max_body_bytes must be at least 1'],
  ['no content types', { body_schema: SCHEMA, allowed_content_types: [] }, 'plugins[0].config.allowed_content_types must not be empty'],
  [
    'a content type that is none',
    { body_schema: SCHEMA, allowed_content_types: ['json'] },
    'plugins[0].config.allowed_content_types[0] must be a media type such as "application/json", "text/*" or "application/*+json"',
  ],
])('refuses %s', (_row, config, message) => {
  expect(gatehouseErrorOf(() => parseApiDefinition(withValidator(config))).message).toBe(message);
});
