/**
 * ip_restriction (config: proto/src/plugins/ip-restriction.ts): refuses a client whose address is in
 * `deny`, or not in a non-empty `allow`, with 403 IP_FORBIDDEN before anything else of the request is
 * looked at (it runs right after cors). Ranges are held in node:net BlockLists, built once per route
 * and snapshot; a client without a known address ('unknown': its socket closed) is in no list.
 */
import { BlockList, isIP } from 'node:net';
import { GatehouseError } from '#proto/errors';
import type { CompiledIpRestriction, IpRange } from '#proto/plugins/index';
import { clientIp } from './client-ip.js';
import type { PluginRuntime } from './runtime.js';

function blockListOf(ranges: readonly IpRange[]): BlockList | null {
  if (ranges.length === 0) return null;
  const list = new BlockList();
  for (const { address, prefix, family } of ranges) list.addSubnet(address, prefix, family);
  return list;
}

export const ipRestrictionRuntime: PluginRuntime<CompiledIpRestriction> = {
  stage: ({ allow, deny, trustForwardHeaders }) => {
    const allowed = blockListOf(allow);
    const denied = blockListOf(deny);
    return {
      request(ex) {
        const ip = clientIp(ex.req, trustForwardHeaders);
        const version = isIP(ip);
        const family = version === 6 ? 'ipv6' : 'ipv4';
        const listed = (list: BlockList) => version !== 0 && list.check(ip, family);
        if ((denied && listed(denied)) || (allowed && !listed(allowed))) {
          throw new GatehouseError('IP_FORBIDDEN', `client address ${ip} is not allowed`);
        }
      },
    };
  },
};
