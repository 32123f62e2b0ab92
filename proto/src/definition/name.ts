import { z } from 'zod';

const NAME = /^[A-Za-z0-9._-]{1,128}$/;
const NAME_RULE = 'must be 1-128 characters of A-Z a-z 0-9 . _ -';

/**
 * A name that appears in an admin URL path (`Location: /apis/{name}`) must not be a dot segment: a
 * client resolving `/apis/..` lands on `/`, so the definition could be created but never addressed.
 */
export function notDotSegment(schema: z.ZodString): z.ZodType<string, string> {
  return schema.refine((name) => name !== '.' && name !== '..', 'must not be "." or ".."');
}

/** Names of APIs and OAuth servers: they appear in admin URL paths, so a safe, bounded alphabet. */
export const nameSchema = notDotSegment(z.string().min(1, 'is required').regex(NAME, NAME_RULE));
