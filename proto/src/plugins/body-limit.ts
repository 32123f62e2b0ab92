/**
 * body_limit: `limit` in Janus units, `B`, `K`, `M`, `G`, `T` (powers of 1024, an optional trailing
 * `B` as in `MB`, any case, decimals allowed: `"1.5M"`). Stored upper-cased without spaces.
 */
import { z } from 'zod';
import { deepFreeze, definePlugin } from './plugin.js';

const UNITS: Record<string, number> = { '': 1, B: 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3, T: 1024 ** 4 };

/** Bytes of a Janus size (`"512K"` → 524288), null when it is not one. */
export function parseSize(text: string): number | null {
  const m = /^(\d+(?:\.\d+)?)([KMGT]?B?)$/.exec(text.replace(/\s+/g, '').toUpperCase());
  if (!m) return null;
  const unit = m[2].length === 2 ? m[2][0] : m[2];
  const bytes = Math.floor(Number(m[1]) * UNITS[unit]);
  return Number.isSafeInteger(bytes) ? bytes : null;
}

const schema = z.object({
  limit: z
    .string()
    .transform((s) => s.replace(/\s+/g, '').toUpperCase())
    .refine((s) => parseSize(s) !== null, 'must be a size such as "10B", "512K", "1M" or "2G"'),
});

export interface CompiledBodyLimit {
  /** Largest request body allowed, in bytes. */
  bytes: number;
}

export const bodyLimitPlugin = definePlugin({
  schema,
  compile: (c): CompiledBodyLimit => deepFreeze({ bytes: parseSize(c.limit)! }),
});
