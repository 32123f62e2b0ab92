/**
 * acl (Kong's acl): authorization by consumer group, after authentication. `allow` or `deny` (exactly
 * one of them lists groups) names groups of the global credentials (`groups` of a key_auth credential
 * or basic_auth user); the consumer key_auth or basic_auth authenticated on the request passes when one
 * of its groups is in `allow`, or none is in `deny`. Upstream it is sent its groups as X-Consumer-Groups
 * unless `hide_groups_header`. An API with acl enabled needs key_auth or basic_auth enabled too
 * (compile/index.ts compileApi): without one there is no consumer to authorize.
 */
import { z } from 'zod';
import { groupListSchema } from '../definition/credential-schema.js';
import { deepFreeze, definePlugin } from './plugin.js';

/** Stored as given (lower-cased, deduplicated, sorted); the other list as `[]`, as ip_restriction's. */
const groups = groupListSchema(256, true).default([]);

const schema = z
  .object({ allow: groups, deny: groups, hide_groups_header: z.boolean().default(false) })
  .refine((c) => c.allow.length > 0 !== c.deny.length > 0, 'must list groups in exactly one of "allow" and "deny"');

export interface CompiledAcl {
  /** The listed groups; `allow` says what they mean. */
  groups: ReadonlySet<string>;
  allow: boolean;
  hideGroupsHeader: boolean;
}

export const aclPlugin = definePlugin({
  schema,
  compile: (c): CompiledAcl =>
    deepFreeze({ groups: new Set(c.allow.length > 0 ? c.allow : c.deny), allow: c.allow.length > 0, hideGroupsHeader: c.hide_groups_header }),
});
