// The two definition kinds the console edits: where they live in the admin API, how a list shows them,
// a starting template, and the friendly fields shown above the JSON editor (each names the field path
// the API uses in its error messages, so a message lands at its field).

const targetsOf = (d) => (d?.upstreams?.targets ?? []).map((t) => t.target).join(', ');

export const apiKind = {
  route: 'apis',
  path: '/apis',
  title: 'APIs',
  singular: 'API',
  columns: [
    ['Listen path', (d) => d.proxy?.listen_path ?? ''],
    ['Hosts', (d) => (d.hosts ?? []).join(', ')],
    ['Methods', (d) => (d.proxy?.methods ?? []).join(', ')],
    ['Targets', (d) => targetsOf(d.proxy)],
    ['Active', (d) => (d.active === false ? 'no' : 'yes')],
  ],
  template: () => ({
    name: '',
    active: true,
    proxy: {
      listen_path: '/example/*',
      strip_path: true,
      upstreams: { balancing: 'roundrobin', targets: [{ target: 'http://127.0.0.1:9000' }] },
    },
    plugins: [],
  }),
  fields: [
    { path: 'name', label: 'Name', type: 'text', hint: '1–128 characters: letters, digits, . _ -' },
    { path: 'proxy.listen_path', label: 'Listen path', type: 'text', hint: 'e.g. /orders/* or /users/{id}' },
    { path: 'hosts', label: 'Hosts', type: 'list', hint: 'comma-separated; *.example.com wildcards allowed' },
    { path: 'proxy.methods', label: 'Methods', type: 'list', hint: 'comma-separated; empty = any method' },
    {
      path: 'proxy.match_headers',
      label: 'Match headers',
      type: 'headers',
      hint: 'one header per line: Name: value, value (a value holding a comma: edit the JSON)',
    },
    { path: 'proxy.upstreams.targets', label: 'Upstream targets', type: 'targets', hint: 'one URL per line' },
    {
      path: 'proxy.upstreams.protocol',
      label: 'Upstream protocol',
      type: 'select',
      options: ['http1', 'http2'],
      hint: 'http2 for gRPC upstreams; — is HTTP/1.1',
    },
    { path: 'proxy.strip_path', label: 'Strip the listen path', type: 'checkbox' },
    { path: 'active', label: 'Active', type: 'checkbox', default: true },
  ],
  /** Errors that name no field but concern one. */
  fieldOfMessage: {
    'api name is already registered': 'name',
    'api listen path is already registered': 'proxy.listen_path',
  },
};

export const oauthServerKind = {
  route: 'oauth-servers',
  path: '/oauth/servers',
  title: 'OAuth servers',
  singular: 'OAuth server',
  columns: [
    ['Token endpoint', (d) => d.oauth_endpoints?.token?.listen_path ?? ''],
    ['Token upstream', (d) => targetsOf(d.oauth_endpoints?.token)],
    ['Strategy', (d) => d.token_strategy?.name ?? ''],
  ],
  template: () => ({
    name: '',
    oauth_endpoints: {
      token: {
        listen_path: '/auth/token',
        methods: ['POST'],
        strip_path: false,
        upstreams: { balancing: 'roundrobin', targets: [{ target: 'http://127.0.0.1:9001/token' }] },
      },
    },
    token_strategy: { name: 'storage', settings: { default_ttl: 3600 } },
  }),
  fields: [
    { path: 'name', label: 'Name', type: 'text', hint: '1–128 characters: letters, digits, . _ -' },
    { path: 'oauth_endpoints.token.listen_path', label: 'Token endpoint listen path', type: 'text' },
    { path: 'oauth_endpoints.token.upstreams.targets', label: 'Token endpoint targets', type: 'targets', hint: 'one URL per line' },
    { path: 'token_strategy.name', label: 'Token strategy', type: 'select', options: ['jwt', 'storage', 'introspection'] },
  ],
  fieldOfMessage: {
    'oauth server name is already registered': 'name',
  },
};

export const definitionKinds = [apiKind, oauthServerKind];
