/**
 * oauth2: the API requires a bearer token valid for the named OAuth server (docs/oauth2.md "OAuth 2.0"). That the
 * server exists, and that its strategy can tell scopes and claims (not `storage`), is checked by
 * compileDefinitions, which sees the whole configuration.
 *
 * - `scopes`: every one must be among the token's (docs/oauth2.md "OAuth 2.0" for where they are read from).
 * - `claims_to_headers`: claim name → upstream header (Envoy's claim_to_headers). The header names are
 *   refused when the gateway owns them (the transformers' rule) or when they are the token's own
 *   Authorization; the client's copies of them are dropped on the route.
 * Both are stored only when given (an empty list or map is the same as none), so older definitions keep their hash.
 */
import { z } from 'zod';
import { headerNameSchema, reservedHeaderReason } from './http-syntax.js';
import { deepFreeze, definePlugin } from './plugin.js';

export const MAX_SCOPES = 32;
export const MAX_CLAIM_HEADERS = 16;

/** RFC 6749 §3.3 scope-token: no space, `"` or `\`, so it also goes into a challenge's quoted-string as is. */
export const scopeSchema = z
  .string()
  .max(256, 'must be at most 256 characters')
  .regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/, 'must be a scope token (printable ASCII without space, " or \\)');

/** A JSON member name of the token's claims (or of the introspection response), e.g. `sub` or a namespaced URI. */
const CLAIM_NAME = /^[\x21-\x7e]{1,256}$/;

export const emptyIsAbsent = (v: unknown) =>
  (Array.isArray(v) && v.length === 0) || (v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0) ? undefined : v;

/** Also openid_connect's (its ID token's claims). */
export const claimsToHeadersSchema = z.record(z.string(), z.string({ error: 'must be a header name' })).superRefine((map, ctx) => {
  const taken = new Map<string, string>();
  for (const [claim, header] of Object.entries(map)) {
    const issue = (message: string) => ctx.addIssue({ code: 'custom', path: [claim], message });
    if (!CLAIM_NAME.test(claim)) issue('is not a claim name (1-256 printable ASCII characters without space)');
    else if (!headerNameSchema.safeParse(header).success) issue('is not a valid header name');
    else {
      const lower = header.toLowerCase();
      const reason = lower === 'authorization' ? "is the bearer token's own header" : reservedHeaderReason(lower);
      if (reason) issue(`${reason} and cannot carry a claim`);
      else if (taken.has(lower)) issue(`names header ${header}, which claim "${taken.get(lower)}" already sets`);
      else taken.set(lower, claim);
    }
  }
  if (taken.size > MAX_CLAIM_HEADERS) ctx.addIssue({ code: 'custom', path: [], message: `must have at most ${MAX_CLAIM_HEADERS} entries` });
});

const schema = z.object({
  server_name: z.string().min(1, 'is required'),
  scopes: z.preprocess(
    emptyIsAbsent,
    z
      .array(scopeSchema)
      .max(MAX_SCOPES, `must have at most ${MAX_SCOPES} scopes`)
      .transform((s) => [...new Set(s)])
      .optional(),
  ),
  claims_to_headers: z.preprocess(emptyIsAbsent, claimsToHeadersSchema.optional()),
});

export interface CompiledOAuth2 {
  serverName: string;
  /** Required scopes; [] for none. */
  scopes: readonly string[];
  /** [claim, lower-case header] pairs, in config order; [] for none. */
  claimHeaders: readonly (readonly [string, string])[];
}

export const oauth2Plugin = definePlugin({
  schema,
  compile: (c): CompiledOAuth2 =>
    deepFreeze({
      serverName: c.server_name,
      scopes: c.scopes ?? [],
      claimHeaders: Object.entries(c.claims_to_headers ?? {}).map(([claim, header]) => [claim, header.toLowerCase()] as const),
    }),
});
