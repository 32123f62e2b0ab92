/**
 * Janus definitions → Gatehouse definitions that behave the same, with every difference reported.
 * Pure (no I/O): the input is what Janus stores or serves (`GET /apis`), the output the items of a
 * configuration document (`PUT /config`) and one report line per item.
 *
 * The semantics are Janus's code (hellofresh/janus, pkg/api, pkg/proxy, pkg/plugin), not its docs:
 * Go's zero values and the libraries' defaults (hystrix, rs/cors, net/http) included.
 */

export type Status = 'unchanged' | 'changed' | 'refused' | 'reset';

export interface ItemReport {
  kind: 'api' | 'oauth_server' | 'basic_auth_user';
  name: string;
  status: Status;
  /** What the import writes differently from the Janus JSON, and why (behaviour kept). */
  changes: string[];
  /** Janus behaviour Gatehouse cannot keep for this item (imported anyway; review). */
  differences: string[];
  /** Why the item is refused or must be reset, and what the operator does. */
  reason?: string;
  /**
   * A refused item the control plane judges itself (short HS keys: the CP's ALLOW_SHORT_HMAC_KEYS):
   * `--apply` submits it, and a control plane that refuses it refuses the whole import.
   */
  submitted?: boolean;
  /** The Gatehouse definition to write (absent when refused or reset). */
  definition?: Record<string, unknown>;
}

/**
 * The defaults that differ between Janus's code and Gatehouse, written out explicitly by the import
 * (docs/migrating-from-janus.md lists the same table).
 */
export const DIFFERING_DEFAULTS: ReadonlyArray<{ field: string; janus: string; gatehouse: string; imported: string }> = [
  { field: 'plugins[].enabled (absent)', janus: 'false (Go zero value)', gatehouse: 'true', imported: 'false' },
  { field: 'proxy.methods (absent)', janus: '["GET"]', gatehouse: '["ALL"]', imported: '["GET"]' },
  { field: 'proxy.methods null or []', janus: 'no route: the API is not served', gatehouse: 'refused / ALL', imported: 'active: false, methods ["GET"]' },
  {
    field: 'proxy.upstreams.balancing absent or not roundrobin/rr/weight',
    janus: 'route not registered ("unsupported balancing algorithm")',
    gatehouse: 'roundrobin',
    imported: 'active: false, balancing "roundrobin"',
  },
  { field: 'targets[].weight with balancing weight', janus: '0: never elected', gatehouse: 'at least 1', imported: 'targets of weight 0 left out' },
  { field: 'forwarding_timeouts.response_header_timeout', janus: '0: no limit', gatehouse: '60s', imported: '"60s" (reported: no unlimited wait)' },
  {
    field: 'rewrite: no strip_path/append_path, target without a path',
    janus: 'upstream path "/"',
    gatehouse: "the client's path",
    imported: 'strip_path: true on an exact listen_path; refused on a /* one',
  },
  { field: 'plugins cors.allow_credentials', janus: 'always true', gatehouse: 'false', imported: 'true (kept false, reported, when any origin is allowed)' },
  { field: 'plugins cb.timeout', janus: '1000 (hystrix)', gatehouse: '0 (off)', imported: '1000' },
  { field: 'plugins cb.max_concurrent_requests', janus: '10 (hystrix)', gatehouse: '0 (off)', imported: '10' },
  { field: 'plugins retry.methods', janus: 'every method', gatehouse: 'the idempotent ones', imported: "the route's methods" },
  {
    field: 'plugins rate_limit.policy absent or not local/redis',
    janus: 'plugin not applied ("policy is not supported")',
    gatehouse: 'local',
    imported: 'enabled: false',
  },
  { field: 'plugins[].name unknown to Janus', janus: 'ignored', gatehouse: 'refused', imported: 'left out' },
  { field: 'plugins response_transformer', janus: 'no effect (headers changed after they were sent)', gatehouse: 'applied', imported: 'enabled: false' },
];

/** Gatehouse refuses HS keys shorter than the hash (RFC 7518 §3.2); Janus accepted any. */
export const MIN_HS_KEY_BYTES = 32;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const clone = <T>(v: T): T => structuredClone(v);

/** Janus's `{name}` rule: letters, digits and single dashes. */
function nameOf(raw: Record<string, unknown>): string {
  return typeof raw.name === 'string' && raw.name !== '' ? raw.name : '(no name)';
}

// ---- Path rewriting: Janus's director (pkg/proxy/reverse_proxy.go) and Gatehouse's rule, side by side.

/** Go's singleJoiningSlash (with cleanSlashes). */
function janusJoin(a: string, b: string): string {
  const clean = (s: string) => {
    if (s.startsWith('//')) s = `/${s.replace(/^\/\//, '')}`;
    if (s.endsWith('//')) s = `${s.replace(/\/\/$/, '')}/`;
    return s;
  };
  a = clean(a);
  b = clean(b);
  const aSlash = a.endsWith('/');
  const bSlash = b.startsWith('/');
  if (aSlash && bSlash) return a + b.slice(1);
  if (!aSlash && !bSlash) return b.length > 0 ? `${a}/${b}` : a;
  return a + b;
}

interface Rewrite {
  listen_path: string;
  strip_path: boolean;
  append_path: boolean;
}

/** The path Janus sends upstream (an empty path goes out as `/`). Listen paths without `{params}` only. */
export function janusUpstreamPath(p: Rewrite, targetPath: string, requestPath: string): string {
  let path = targetPath;
  if (p.append_path) path = janusJoin(targetPath, requestPath);
  if (p.strip_path) {
    path = janusJoin(targetPath, requestPath);
    // The first occurrence anywhere in the joined path, the target's part included.
    path = path.replace(p.listen_path.replace(/\/\*(.+)?/, ''), '');
    if (!targetPath.endsWith('/') && path.endsWith('/')) path = path.slice(0, -1);
  }
  return path === '' ? '/' : path;
}

/** Gatehouse's rule (docs/proxy.md "Proxy behaviour", Forwarded path). */
export function gatehouseUpstreamPath(p: Rewrite, targetPath: string, requestPath: string): string {
  const join = (a: string, b: string) => {
    let j: string;
    if (a === '') j = b;
    else if (b === '') j = a;
    else if (a.endsWith('/') && b.startsWith('/')) j = a + b.slice(1);
    else if (a.endsWith('/') || b.startsWith('/')) j = a + b;
    else j = `${a}/${b}`;
    return j === '' ? '/' : j;
  };
  const matched = p.listen_path.endsWith('/*') ? p.listen_path.slice(0, -2) : requestPath;
  if (p.strip_path) return join(targetPath, requestPath.startsWith(matched) ? requestPath.slice(matched.length) : requestPath);
  if (p.append_path) return join(targetPath, requestPath);
  return targetPath === '' || targetPath === '/' ? requestPath : targetPath;
}

/** Request paths that exercise a listen path: the prefix alone, with a slash, deeper, with a trailing slash. */
function samplePaths(listenPath: string): string[] {
  if (!listenPath.endsWith('/*')) return [listenPath];
  const base = listenPath.slice(0, -2);
  return [base || '/', `${base}/`, `${base}/a`, `${base}/a/b`, `${base}/a/`];
}

function targetPathOf(target: string): string {
  return /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\/[^/?#]*([^?#]*)/.exec(target)?.[1] ?? '';
}

type RewriteOutcome = { strip_path?: true; change?: string; difference?: string; refusal?: string };

/** Which proxy flags give Janus's upstream paths, or why none does. */
function mapRewrite(p: Rewrite, targets: string[]): RewriteOutcome {
  // `{param}` listen paths: both gateways remove the matched sections the same way (docs/proxy.md, the forwarded-path rules).
  if (/[{}]/.test(p.listen_path) || p.listen_path === '') return {};
  const samples = samplePaths(p.listen_path);
  const candidates: Rewrite[] = [p];
  if (!p.strip_path && !p.append_path) candidates.push({ ...p, strip_path: true });
  const mismatches = (c: Rewrite) =>
    targets.flatMap((t) => {
      const tp = targetPathOf(t);
      return samples
        .filter((r) => janusUpstreamPath(p, tp, r) !== gatehouseUpstreamPath(c, tp, r))
        .map((r) => ({ r, janus: janusUpstreamPath(p, tp, r), ours: gatehouseUpstreamPath(c, tp, r) }));
    });
  const results = candidates.map((c) => ({ c, bad: mismatches(c) }));
  const exact = results.find((x) => x.bad.length === 0);
  if (exact) {
    if (exact.c === p) return {};
    const tp = targetPathOf(targets[0] ?? '') || '/';
    return {
      strip_path: true,
      change: `strip_path: true: Janus forwards ${p.listen_path} to ${tp} (the target's path); without it Gatehouse would forward the client's path`,
    };
  }
  // Only paths ending in "/" differ: Janus drops that slash after stripping, Gatehouse keeps it.
  const slashOnly = results.find((x) => x.bad.every((m) => m.r.endsWith('/') && m.r !== '/' && `${m.janus}/` === m.ours));
  if (slashOnly) {
    const m = slashOnly.bad[0];
    return {
      ...(slashOnly.c !== p && { strip_path: true as const }),
      difference: `trailing slash: Janus forwards ${m.r} to ${m.janus}, Gatehouse to ${m.ours} (Janus drops the slash after strip_path)`,
    };
  }
  const m = results[0].bad[0];
  const targetHasNoPath = !p.strip_path && !p.append_path;
  return {
    refusal: targetHasNoPath
      ? `rewrite: Janus forwards every request of ${p.listen_path} to ${m.janus} (the target has no path and neither strip_path nor append_path is set); no Gatehouse definition does. Set append_path (the client's path) or give the target the path the upstream expects, then import again`
      : `rewrite: Janus forwards ${m.r} to ${m.janus} (it removes the first "${p.listen_path.replace(/\/\*(.+)?/, '')}" anywhere in the joined path, the target's part included), Gatehouse would send ${m.ours}. Change the target's path or the listen_path so they do not overlap, then import again`,
  };
}

// ---- Proxy objects (APIs and OAuth endpoints).

const JANUS_BALANCERS = new Set(['roundrobin', 'rr', 'weight']);

interface ProxyOutcome {
  proxy: Record<string, unknown>;
  changes: string[];
  differences: string[];
  /** Janus registers no route for it (the API or endpoint exists but answers nothing). */
  notServed?: string;
  refusal?: string;
}

function translateProxy(raw: unknown): ProxyOutcome {
  const proxy = isObject(raw) ? clone(raw) : {};
  const changes: string[] = [];
  const differences: string[] = [];
  let notServed: string | undefined;
  let refusal: string | undefined;

  // Janus's NewDefinition sets ["GET"]; JSON null or [] leaves no method, so no route.
  if (!('methods' in proxy)) {
    proxy.methods = ['GET'];
    changes.push('methods: ["GET"]: Janus answers only GET when methods is absent (Gatehouse: every method)');
  } else if (!Array.isArray(proxy.methods) || proxy.methods.length === 0) {
    proxy.methods = ['GET'];
    notServed = 'methods is empty: Janus registers no route for it';
  }

  const upstreams = isObject(proxy.upstreams) ? proxy.upstreams : {};
  proxy.upstreams = upstreams;
  const balancing = typeof upstreams.balancing === 'string' ? upstreams.balancing : '';
  if (!JANUS_BALANCERS.has(balancing)) {
    upstreams.balancing = 'roundrobin';
    notServed ??= `balancing ${balancing === '' ? 'is absent' : `"${balancing}" is not roundrobin, rr or weight`}: Janus refuses it ("unsupported balancing algorithm") and registers no route`;
  }
  const targets = (Array.isArray(upstreams.targets) ? upstreams.targets : []).filter(isObject);
  if (upstreams.balancing === 'weight') {
    const weighted = targets.filter((t) => typeof t.weight === 'number' && t.weight > 0);
    if (weighted.length === 0 && targets.length > 0)
      refusal = 'every target has weight 0: Janus cannot elect any (its 502 for every request). Give the targets weights in Janus, then import again';
    else if (weighted.length < targets.length)
      changes.push(
        `targets of weight 0 left out (${targets
          .filter((t) => !weighted.includes(t))
          .map((t) => t.target)
          .join(', ')}): Janus never elects them`,
      );
    upstreams.targets = weighted;
  } else {
    // Go's zero weight, as Janus serves it; unused by round robin on both gateways.
    upstreams.targets = targets.map((t) => (typeof t.weight === 'number' && t.weight > 0 ? t : { ...t, weight: undefined }));
  }

  // Janus's net/http transport: a dial timeout of 0 is 30s (ours too); a response header timeout of 0 is none.
  const timeouts = isObject(proxy.forwarding_timeouts) ? proxy.forwarding_timeouts : {};
  // Janus keeps 0 for what time.ParseDuration refuses (a number, "30"), as for "0s".
  const zero = (v: unknown) => typeof v !== 'string' || !/^(\d*\.?\d*(ns|us|µs|μs|ms|s|m|h))+$/.test(v) || !/[1-9]/.test(v);
  if (zero(timeouts.dial_timeout)) delete timeouts.dial_timeout;
  if (zero(timeouts.response_header_timeout)) {
    timeouts.response_header_timeout = '60s';
    differences.push(
      'response_header_timeout "60s": Janus waits for response headers without limit, Gatehouse has no unlimited wait (raise it for slower upstreams)',
    );
  }
  proxy.forwarding_timeouts = timeouts;

  const rewrite = mapRewrite(
    {
      listen_path: typeof proxy.listen_path === 'string' ? proxy.listen_path : '',
      strip_path: proxy.strip_path === true,
      append_path: proxy.append_path === true,
    },
    (upstreams.targets as Record<string, unknown>[]).map((t) => String(t.target ?? '')),
  );
  if (rewrite.strip_path) proxy.strip_path = true;
  if (rewrite.change) changes.push(rewrite.change);
  if (rewrite.difference) differences.push(rewrite.difference);
  refusal ??= rewrite.refusal;
  return { proxy, changes, differences, notServed, refusal };
}

// ---- Plugins.

const JANUS_PLUGINS = new Set([
  'basic_auth',
  'body_limit',
  'cb',
  'compression',
  'cors',
  'oauth2',
  'organization_auth',
  'rate_limit',
  'request_transformer',
  'response_transformer',
  'retry',
]);

const HYSTRIX_DEFAULTS = { timeout: 1000, max_concurrent_requests: 10 } as const;

function translatePlugins(raw: unknown, routeMethods: unknown): { plugins: unknown[]; changes: string[]; differences: string[]; refusal?: string } {
  const changes: string[] = [];
  const differences: string[] = [];
  let refusal: string | undefined;
  const given = (Array.isArray(raw) ? raw : []).filter(isObject);
  // Janus skips a plugin it does not know (and serves the API without it).
  for (const p of given.filter((p) => !JANUS_PLUGINS.has(String(p.name))))
    changes.push(`plugin ${JSON.stringify(p.name)} left out: Janus does not know it and ignores it`);
  const plugins = given
    .filter((p) => JANUS_PLUGINS.has(String(p.name)))
    .map((p) => {
      const plugin = clone(p);
      // Go's zero value: `enabled` absent is false in Janus (Gatehouse's default is true).
      if (plugin.enabled === undefined) {
        plugin.enabled = false;
        changes.push(`${plugin.name}: enabled: false: Janus's zero value when enabled is absent`);
      }
      const config: Record<string, unknown> = isObject(plugin.config) ? plugin.config : {};
      plugin.config = config;
      if (plugin.enabled !== true) return plugin;
      switch (plugin.name) {
        case 'cors': {
          const domains = Array.isArray(config.domains) ? config.domains : [];
          if (domains.length > 0 && !domains.includes('*')) {
            config.allow_credentials = true;
            changes.push('cors: allow_credentials: true: Janus always allows credentials');
          } else {
            differences.push(
              'cors: credentials not allowed: Janus allows them from any origin, which Gatehouse refuses (list the origins in domains to allow credentials)',
            );
          }
          break;
        }
        case 'cb':
          for (const [field, value] of Object.entries(HYSTRIX_DEFAULTS)) {
            if (!config[field]) {
              config[field] = value;
              changes.push(`cb: ${field}: ${value}: hystrix's default in Janus (Gatehouse: off)`);
            }
          }
          break;
        case 'retry':
          if (config.methods === undefined) {
            config.methods =
              Array.isArray(routeMethods) && !routeMethods.some((m) => String(m).toUpperCase() === 'ALL')
                ? routeMethods
                : ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
            changes.push(
              `retry: methods: ${JSON.stringify(config.methods)}: Janus retries every method (Gatehouse: the idempotent ones); a request whose body went upstream is still not re-sent`,
            );
          }
          break;
        case 'rate_limit':
          differences.push('rate_limit: a JSON 429 with Retry-After instead of Janus\'s plain-text "Limit exceeded"');
          if (config.trust_forward_headers === true)
            differences.push('rate_limit: the right-most X-Forwarded-For address is counted, not the left-most (a client cannot choose it)');
          if (config.policy !== 'local' && config.policy !== 'redis') {
            // Janus's setup fails ("policy is not supported") and the API is served without the plugin.
            plugin.enabled = false;
            changes.push(
              `rate_limit: enabled: false: Janus does not apply it (policy ${JSON.stringify(config.policy ?? null)} is neither "local" nor "redis")`,
            );
            break;
          }
          if (config.policy === 'redis') changes.push("rate_limit: redis.dsn/prefix dropped: counters go to the data plane's REDIS_URL");
          break;
        case 'response_transformer':
          plugin.enabled = false;
          changes.push(
            'response_transformer: enabled: false: Janus changes the headers after the response was sent, so the plugin has no effect there (enable it to get its documented effect)',
          );
          break;
        case 'request_transformer':
          if (['add', 'append', 'replace', 'remove'].some((a) => isObject(config[a]) && (config[a] as Record<string, unknown>).body !== undefined)) {
            differences.push('request_transformer: body actions are not supported and are dropped');
          }
          break;
        case 'organization_auth':
          refusal =
            'plugin organization_auth has no Gatehouse equivalent: use basic_auth or key_auth with acl groups, remove the plugin in Janus, then import again';
          break;
      }
      return plugin;
    });
  return { plugins, changes, differences, refusal };
}

function finish(report: Omit<ItemReport, 'status'>): ItemReport {
  const status: Status = report.reason ? 'refused' : report.changes.length + report.differences.length > 0 ? 'changed' : 'unchanged';
  return { ...report, status, ...(report.reason && !report.submitted && { definition: undefined }) };
}

/** Janus-only members that Gatehouse drops silently anyway; removed so the written definition is clean. */
function withoutJanusOnly(def: Record<string, unknown>): Record<string, unknown> {
  const { _id, health_check, ...rest } = def;
  void _id;
  void health_check;
  return rest;
}

export function translateApi(raw: unknown): ItemReport {
  const input = isObject(raw) ? withoutJanusOnly(clone(raw)) : {};
  const name = nameOf(input);
  const proxy = translateProxy(input.proxy);
  const plugins = translatePlugins(input.plugins, proxy.proxy.methods);
  const changes = [...proxy.changes, ...plugins.changes];
  const differences = [...proxy.differences, ...plugins.differences];
  // Janus's definition has no top-level hosts (only proxy.hosts): it ignores one.
  if ('hosts' in input) {
    delete input.hosts;
    changes.push('top-level hosts left out: Janus ignores it (it matches proxy.hosts only)');
  }
  // Janus compares the whole Host header, port included; Gatehouse compares it without the port.
  const hosts = Array.isArray(proxy.proxy.hosts) ? (proxy.proxy.hosts as unknown[]) : [];
  const withPort = hosts.filter((h): h is string => typeof h === 'string' && /:\d+$/.test(h));
  if (withPort.length > 0) {
    proxy.proxy.hosts = hosts.map((h) => (typeof h === 'string' ? h.replace(/:\d+$/, '') : h));
    differences.push(`hosts ${withPort.join(', ')}: Gatehouse matches the host without its port, so any port now matches`);
  }
  const def: Record<string, unknown> = { ...input, proxy: proxy.proxy, plugins: plugins.plugins };
  if (def.active === undefined) def.active = true;
  if (proxy.notServed && def.active !== false) {
    def.active = false;
    changes.push(`active: false: ${proxy.notServed}`);
  }
  const reason = proxy.refusal ?? plugins.refusal;
  return finish({ kind: 'api', name, changes, differences, reason, definition: def });
}

function hsKeyBytes(strategy: Record<string, unknown>): number | undefined {
  if (strategy.name !== 'jwt') return undefined;
  const settings = strategy.settings;
  // Janus's legacy {"secret"} is one HS256 key.
  const keys = Array.isArray(settings)
    ? settings.filter(isObject)
    : isObject(settings) && typeof settings.secret === 'string'
      ? [{ alg: 'HS256', key: settings.secret }]
      : [];
  const lengths = keys.filter((k) => /^HS/i.test(String(k.alg ?? '')) && typeof k.key === 'string').map((k) => Buffer.byteLength(k.key as string));
  const short = lengths.filter((n) => n < MIN_HS_KEY_BYTES);
  return short.length > 0 ? Math.min(...short) : undefined;
}

export function translateOAuthServer(raw: unknown): ItemReport {
  const input = isObject(raw) ? withoutJanusOnly(clone(raw)) : {};
  const name = nameOf(input);
  const changes: string[] = [];
  const differences: string[] = [];
  let reason: string | undefined;
  const endpoints = isObject(input.oauth_endpoints) ? input.oauth_endpoints : {};
  for (const [which, endpoint] of Object.entries(endpoints)) {
    // Janus fills every endpoint with an empty definition; one without a listen_path is not served.
    if (!isObject(endpoint) || typeof endpoint.listen_path !== 'string' || endpoint.listen_path === '') {
      delete endpoints[which];
      continue;
    }
    const p = translateProxy(endpoint);
    endpoints[which] = p.proxy;
    changes.push(...p.changes.map((c) => `${which}: ${c}`));
    differences.push(...p.differences.map((d) => `${which}: ${d}`));
    if (p.notServed) differences.push(`${which}: ${p.notServed}; Gatehouse serves it`);
    reason ??= p.refusal && `${which}: ${p.refusal}`;
  }
  input.oauth_endpoints = endpoints;
  // Members of Janus's server that Gatehouse's has not (dropped by the control plane anyway).
  const corsMeta = isObject(input.cors_meta) ? input.cors_meta : {};
  const origins = Array.isArray(corsMeta.domains) && corsMeta.domains.length > 0 ? corsMeta.domains.join(', ') : 'any origin';
  differences.push(`CORS: Janus answers CORS on every OAuth endpoint (${origins}, with credentials); Gatehouse's OAuth endpoints answer none`);
  if (isObject(input.rate_limit) && input.rate_limit.enabled === true)
    differences.push(`rate_limit ${String(input.rate_limit.limit)} on the endpoints: Gatehouse's OAuth endpoints have no rate limit`);
  if (isObject(input.secrets) && Object.keys(input.secrets).length > 0)
    differences.push("secrets: Janus adds a client's secret to token requests; Gatehouse does not (clients must send their own)");
  const clientEndpoints = isObject(input.oauth_client_endpoints)
    ? Object.entries(input.oauth_client_endpoints).filter(([, e]) => isObject(e) && e.listen_path)
    : [];
  if (clientEndpoints.length > 0)
    differences.push(`oauth_client_endpoints (${clientEndpoints.map(([k]) => k).join(', ')}) are not served by Gatehouse: define them as APIs`);
  if (Array.isArray(input.access_rules) && input.access_rules.length > 0) {
    // Dropping them would let tokens through that Janus denies.
    reason ??=
      'access_rules have no Gatehouse equivalent, and without them tokens Janus denies would pass: express them with the token policy (issuer, audiences, scopes) or remove them in Janus, then import again';
  }
  for (const member of [
    'cors_meta',
    'rate_limit',
    'secrets',
    'oauth_client_endpoints',
    'access_rules',
    'allowed_access_types',
    'allowed_authorize_types',
    'auth_login_redirect',
  ])
    delete input[member];
  const strategy = isObject(input.token_strategy) ? input.token_strategy : {};
  const introspection = isObject(strategy.settings) ? strategy.settings : {};
  if (strategy.name === 'introspection' && introspection.use_auth_header !== true) {
    // Janus GETs the endpoint with the token in `header_name`, or in a form net/http never sends for a client request.
    differences.push(
      `introspection: Janus sends a GET with the token ${introspection.use_custom_header === true ? `in header ${String(introspection.header_name)}` : 'nowhere (its form is not sent)'}; Gatehouse POSTs RFC 7662's form (token=…): check the endpoint accepts it, or set use_auth_header`,
    );
  }
  const short = hsKeyBytes(strategy);
  let submitted = false;
  if (short !== undefined && !reason) {
    reason = `HS256 key is ${short} bytes: rotate it, or set ALLOW_SHORT_HMAC_KEYS=true on the control plane during the migration`;
    submitted = true;
  }
  return finish({ kind: 'oauth_server', name, changes, differences, reason, submitted, definition: input });
}

/** Janus's basic_auth users: `{username, password}`, the password a bcrypt hash. */
export function translateBasicAuthUser(raw: unknown): ItemReport {
  const input = isObject(raw) ? raw : {};
  const name = typeof input.username === 'string' ? input.username : '(no username)';
  const password = typeof input.password === 'string' ? input.password : '';
  // An scrypt hash in Gatehouse's form is carried over; Gatehouse cannot verify anything else (Janus's bcrypt).
  if (/^scrypt\$/.test(password)) {
    return finish({ kind: 'basic_auth_user', name, changes: [], differences: [], definition: { username: name, password_hash: password } });
  }
  const format = /^\$2[abxy]?\$/.test(password) ? 'bcrypt' : 'unknown';
  return {
    kind: 'basic_auth_user',
    name,
    status: 'reset',
    changes: [],
    differences: [],
    reason: `password hash is ${format}, which Gatehouse cannot verify (it stores scrypt): not imported; set a new password with \`gatehouse basic-auth create ${name}\``,
  };
}

export interface JanusConfig {
  apis: unknown[];
  oauthServers: unknown[];
  basicAuthUsers: unknown[];
}

/** Janus keeps the last definition read of a name (a map by name); an earlier one is not served. */
function lastOfEachName(items: ItemReport[]): ItemReport[] {
  return items.map((item, i) =>
    items.some((later, j) => j > i && later.kind === item.kind && later.name === item.name)
      ? {
          kind: item.kind,
          name: item.name,
          status: 'changed',
          changes: ['not imported: a later definition of the same name replaces it, as in Janus (it keeps the last one read)'],
          differences: [],
        }
      : item,
  );
}

export function translateAll(config: JanusConfig): ItemReport[] {
  return lastOfEachName([
    ...config.apis.map(translateApi),
    ...config.oauthServers.map(translateOAuthServer),
    ...config.basicAuthUsers.map(translateBasicAuthUser),
  ]);
}
