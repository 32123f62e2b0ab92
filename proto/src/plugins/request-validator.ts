/**
 * request_validator (Kong's `request-validator`): the request body is checked against a JSON Schema (draft 2020-12,
 * compiled by ajv) before anything goes upstream.
 *
 * - `body_schema`: the schema, a JSON object of at most 64 KiB serialized. Compiled in ajv's strict mode (unknown
 *   keywords, `properties` without `"type": "object"`, a `required` name `properties` lacks are refused) with union
 *   types allowed, and the formats of ajv-formats. A `$ref` resolves only inside the schema: nothing is fetched.
 * - `allowed_content_types` (default `["application/json"]`): media ranges as compression's `content_types`.
 * - `max_body_bytes` (default 1 MiB, at most 8 MiB): the body is buffered whole to be validated.
 * - `body_required` (default false): a request without a body is refused rather than let through.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import { z } from 'zod';
import { compileMediaRanges, contentTypeSchema, type MediaRanges } from './compression.js';
import { commaList } from './http-syntax.js';
import { deepFreeze, definePlugin } from './plugin.js';

export const MAX_BODY_SCHEMA_BYTES = 64 * 1024;
export const MAX_VALIDATED_BODY_BYTES = 8 * 1024 * 1024;

/**
 * One ajv for every schema, emptied after each compile: a compiled function keeps working without its instance, a
 * schema's `$id` then never collides with another API's, and ajv's cache (keyed by schema object, a new one per
 * parse) cannot grow with every snapshot. An instance per schema would cost many times a compile.
 * `allErrors: false`: validation stops at the first error, so a body costs at most one walk of the schema.
 */
const ajv = new Ajv2020({ strict: true, allowUnionTypes: true, allErrors: false, ownProperties: true });
formats.default(ajv);

/** The schema's validator; throws ajv's error (or a RangeError for a schema nested too deeply) when it is not valid. */
function compileSchema(schema: Record<string, unknown>): ValidateFunction {
  try {
    return ajv.compile(schema);
  } finally {
    ajv.removeSchema();
  }
}

const schema = z
  .object({
    body_schema: z.record(z.string(), z.unknown()),
    allowed_content_types: commaList(contentTypeSchema)
      .default(['application/json'])
      .refine((t) => t.length > 0, 'must not be empty')
      .transform((t) => [...new Set(t)]),
    max_body_bytes: z
      .int()
      .min(1)
      .max(MAX_VALIDATED_BODY_BYTES)
      .default(1024 * 1024),
    body_required: z.boolean().default(false),
  })
  .superRefine((c, ctx) => {
    const issue = (message: string) => ctx.addIssue({ code: 'custom', path: ['body_schema'], message });
    let size: number;
    try {
      size = Buffer.byteLength(JSON.stringify(c.body_schema));
    } catch {
      return issue('is nested too deeply');
    }
    if (size > MAX_BODY_SCHEMA_BYTES) return issue(`is over ${MAX_BODY_SCHEMA_BYTES} bytes serialized`);
    try {
      compileSchema(c.body_schema);
    } catch (err) {
      issue(`is not a valid JSON Schema (draft 2020-12): ${(err as Error).message}`);
    }
  });

export type RequestValidatorConfig = z.output<typeof schema>;

export interface CompiledRequestValidator {
  validate: ValidateFunction;
  contentTypes: MediaRanges;
  maxBytes: number;
  bodyRequired: boolean;
}

export const requestValidatorPlugin = definePlugin({
  schema,
  compile: (c): CompiledRequestValidator =>
    deepFreeze({
      validate: compileSchema(c.body_schema),
      contentTypes: compileMediaRanges(c.allowed_content_types),
      maxBytes: c.max_body_bytes,
      bodyRequired: c.body_required,
    }),
});
