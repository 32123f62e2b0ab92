import { z } from 'zod';

const NAME = /^[A-Za-z0-9._-]{1,128}$/;
const NAME_RULE = 'must be 1-128 characters of A-Z a-z 0-9 . _ -';

/** Names of APIs and OAuth servers: they appear in admin URL paths, so a safe, bounded alphabet. */
export const nameSchema = z.string().min(1, 'is required').regex(NAME, NAME_RULE);
