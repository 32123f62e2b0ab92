/**
 * acl (config: proto/src/plugins/acl.ts): runs after authentication, on the consumer key_auth or
 * basic_auth found (ex.consumer, ex.consumerGroups: its credential's groups). It passes when one of
 * its groups is listed (`allow`) or none is (`deny`); otherwise 403 `"you cannot consume this
 * service"` (ACL_FORBIDDEN), as Kong answers, before the upstream is reached. A request without a
 * consumer (compile requires key_auth or basic_auth on the API, so only if that ever broke) is refused
 * the same way: fail closed. The upstream gets the consumer's groups as `X-Consumer-Groups: a, b`
 * unless hide_groups_header (the proxy sets it, and drops any copy a client sent on every route,
 * proxy/headers.ts).
 */
import { GatehouseError } from '#proto/errors';
import type { CompiledAcl } from '#proto/plugins/index';
import type { PluginRuntime } from './runtime.js';

export const aclRuntime: PluginRuntime<CompiledAcl> = {
  stage: ({ groups, allow, hideGroupsHeader }) => ({
    request(ex) {
      const listed = ex.consumerGroups.some((group) => groups.has(group));
      if (ex.consumer === null || listed !== allow) throw new GatehouseError('ACL_FORBIDDEN', `consumer ${JSON.stringify(ex.consumer)} is not allowed by acl`);
      if (!hideGroupsHeader && ex.consumerGroups.length > 0) ex.groupsHeader = ex.consumerGroups.join(', ');
    },
  }),
};
