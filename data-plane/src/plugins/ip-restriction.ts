/**
 * ip_restriction (config: proto/src/plugins/ip-restriction.ts): refuses a client whose address is in
 * `deny`, or not in a non-empty `allow`, with 403 IP_FORBIDDEN before anything else of the request is
 * looked at (it runs right after cors). The address is client-ip.ts's (TRUSTED_PROXIES). A client without a known address ('unknown': its socket
 * closed) is in no list.
 */
import { GatehouseError } from '#proto/errors';
import { addressWords, inRanges, type CompiledIpRestriction } from '#proto/plugins/ip-restriction';
import { clientAddress } from './client-ip.js';
import type { PluginRuntime } from './runtime.js';

export const ipRestrictionRuntime: PluginRuntime<CompiledIpRestriction> = {
  stage: ({ allow, deny }, { trustedProxies }) => ({
    request(ex) {
      const ip = clientAddress(ex.req, trustedProxies);
      const address = addressWords(ip);
      const inDeny = address !== null && deny.length > 0 && inRanges(address, deny);
      if (inDeny || (allow.length > 0 && (address === null || !inRanges(address, allow)))) {
        throw new GatehouseError('IP_FORBIDDEN', `client address ${ip} is not allowed`);
      }
    },
  }),
};
