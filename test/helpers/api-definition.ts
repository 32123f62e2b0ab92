/**
 * Builds raw API definitions as a user would POST them, with only what a test needs spelled out.
 */

export interface ApiDefinitionInput {
  name: string;
  listenPath?: string;
  /** Target URLs, in order. */
  targets: string[];
  hosts?: string[];
  methods?: string[];
  /** proxy.match_headers. */
  matchHeaders?: Record<string, string[]>;
  stripPath?: boolean;
  appendPath?: boolean;
  preserveHost?: boolean;
  insecureSkipVerify?: boolean;
  /** proxy.allow_encoded_slashes. */
  allowEncodedSlashes?: boolean;
  active?: boolean;
  responseHeaderTimeout?: string;
  plugins?: unknown[];
  /** proxy.upstreams.protocol. */
  protocol?: 'http1' | 'http2';
}

export function apiDefinition(input: ApiDefinitionInput): Record<string, unknown> {
  const proxy: Record<string, unknown> = {
    upstreams: {
      balancing: 'roundrobin',
      targets: input.targets.map((target) => ({ target })),
      ...(input.protocol !== undefined && { protocol: input.protocol }),
    },
  };
  if (input.listenPath !== undefined) proxy.listen_path = input.listenPath;
  if (input.methods !== undefined) proxy.methods = input.methods;
  if (input.matchHeaders !== undefined) proxy.match_headers = input.matchHeaders;
  if (input.stripPath !== undefined) proxy.strip_path = input.stripPath;
  if (input.appendPath !== undefined) proxy.append_path = input.appendPath;
  if (input.preserveHost !== undefined) proxy.preserve_host = input.preserveHost;
  if (input.insecureSkipVerify !== undefined) proxy.insecure_skip_verify = input.insecureSkipVerify;
  if (input.allowEncodedSlashes !== undefined) proxy.allow_encoded_slashes = input.allowEncodedSlashes;
  if (input.responseHeaderTimeout !== undefined) {
    proxy.forwarding_timeouts = { response_header_timeout: input.responseHeaderTimeout };
  }
  const definition: Record<string, unknown> = { name: input.name, proxy };
  if (input.hosts !== undefined) definition.hosts = input.hosts;
  if (input.active !== undefined) definition.active = input.active;
  if (input.plugins !== undefined) definition.plugins = input.plugins;
  return definition;
}
