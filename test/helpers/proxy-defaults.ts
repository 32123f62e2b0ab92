/**
 * The docs/admin-api.md "Administration API" defaults of a proxy object, written out once the way the tests expect them to be
 * shown on read. Kept apart from the product's schema on purpose: tests compare against this.
 */
export function proxyDefaults() {
  return {
    methods: ['ALL'],
    strip_path: false,
    append_path: false,
    preserve_host: false,
    insecure_skip_verify: false,
    forwarding_timeouts: { dial_timeout: '30s', response_header_timeout: '60s' },
  };
}
