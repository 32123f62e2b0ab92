/**
 * Upstream target templates: `http://{service}:9000/recipes/{id}?v=1`. Validated at compile time,
 * resolved per request by substituting the listen_path parameters. The request picks at most what the
 * operator left open: a placeholder in the host fills one DNS label (`[a-z0-9]([-a-z0-9]*[a-z0-9])?`, no dot, so
 * no other domain) unless the target's `host_pattern` widens it, one in the port a port number; the host they form
 * is never an IP literal or `localhost` (loopback, link-local metadata addresses and the like are not the client's
 * to choose). Values in the path or query are percent-encoded.
 */
import { GatehouseError } from '../errors.js';
import { fieldError } from '../definition/field-path.js';
import { HOSTNAME } from './host-match.js';

const PLACEHOLDER = /\{([A-Za-z_][A-Za-z0-9_]*)\}/g;
const TEMPLATE = /^(https?):\/\/([^/?#]*)([^?#]*)(?:\?([^#]*))?(?:#.*)?$/i;
/** What one placeholder may fill in a target's host by default: one DNS label (RFC 1123). */
const HOST_LABEL = /^[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?$/i;
/** With a host_pattern: host name characters only (the pattern then judges the whole host). */
const HOST_CHARS = /^[A-Za-z0-9.-]{1,253}$/;
const PORT_VALUE = /^[0-9]{1,5}$/;
/** A WHATWG URL's host that is an IP literal: IPv4 in its dotted form (`2130706433`, `0x7f.1` parse to it), IPv6 in brackets. */
const IP_HOST = /^(?:[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+|\[.*\])$/;

export interface ResolvedTarget {
  /** `http://host[:port]`: the undici pool key. */
  origin: string;
  /** host[:port] as the Host header carries it (default port omitted). */
  host: string;
  /** Path of the target, at least `/`. */
  path: string;
  /** Query of the target without `?`, '' when none. */
  query: string;
}

export interface TargetPlan {
  scheme: 'http' | 'https';
  /**
   * A Kubernetes Service (`k8s://name[.namespace]:port/path`): the control plane replaces it by its ready
   * endpoints in the snapshot, so a data plane holds one only while the Service has none (NO_ENDPOINTS).
   */
  service?: ServiceTarget;
  authority: string;
  path: string;
  query: string;
  /** Set when the template has no placeholders: resolved once at compile time. */
  resolved?: ResolvedTarget;
}

export interface ServiceTarget {
  name: string;
  /** null = the control plane's own namespace. */
  namespace: string | null;
  /** The Service port's number or name. */
  port: number | string;
}

// DNS-1035 label (a Service name), DNS-1123 label (a namespace), IANA_SVC_NAME (a port name): what the apiserver allows.
const SERVICE_TARGET =
  /^k8s(?:\+(https?))?:\/\/([a-z]([-a-z0-9]{0,61}[a-z0-9])?)(?:\.([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?))?:([0-9]{1,5}|[a-z0-9](?:[-a-z0-9]{0,13}[a-z0-9])?)(\/[^?#]*)?$/i;

/** `k8s://`, `k8s+http://`, `k8s+https://`: a target that names a Kubernetes Service. */
export const isServiceTarget = (template: string): boolean => /^k8s(\+https?)?:\/\//i.test(template);

function hasPlaceholder(s: string): boolean {
  return s.search(PLACEHOLDER) >= 0;
}

function substitute(template: string, params: Readonly<Record<string, string>>, encode: (v: string) => string): string {
  return template.replace(PLACEHOLDER, (_, name: string) => encode(params[name] ?? ''));
}

function badHost(message: string): never {
  throw new GatehouseError('BAD_UPSTREAM_HOST', message);
}

function resolveAuthority(scheme: string, authority: string): Pick<ResolvedTarget, 'origin' | 'host'> & { hostname: string } {
  let url: URL;
  try {
    url = new URL(`${scheme}://${authority}/`);
  } catch {
    return badHost(`upstream authority "${authority}" is not valid`);
  }
  if (url.username || url.password) badHost('upstream authority must not carry user info');
  const hostname = url.hostname.endsWith('.') ? url.hostname.slice(0, -1) : url.hostname;
  if (!HOSTNAME.test(hostname) && !hostname.startsWith('[')) {
    badHost(`upstream host "${url.hostname}" is not a valid host name`);
  }
  return { origin: url.origin, host: url.host, hostname };
}

function encodePathValue(value: string): string {
  // A captured value must stay one segment: `/`, `?`, `#` and `%` are encoded by
  // encodeURIComponent, and a bare dot segment would let the client climb the target's path.
  if (value === '.' || value === '..') badHost('placeholder value forms a dot segment in the target path');
  return encodeURIComponent(value);
}

const labelValue = (value: string): string => (HOST_LABEL.test(value) ? value : badHost(`placeholder value "${value}" is not one DNS label`));
const hostCharsValue = (value: string): string => (HOST_CHARS.test(value) ? value : badHost(`placeholder value "${value}" is not a valid host name part`));
const portValue = (value: string): string => (PORT_VALUE.test(value) ? value : badHost(`placeholder value "${value}" is not a port number`));

/** Where an authority template's host ends: its `]` (an IPv6 literal), else its first `:` (a host name has none). */
function hostEnd(authority: string): number {
  const end = authority.startsWith('[') ? authority.indexOf(']') + 1 : authority.indexOf(':');
  return end <= 0 ? authority.length : end;
}

/**
 * Substitute `params` into a compiled target; `hostPattern` is the target's compiled host_pattern (null: one DNS
 * label per host placeholder). Throws GatehouseError BAD_UPSTREAM_HOST.
 */
export function resolveTarget(plan: TargetPlan, params: Readonly<Record<string, string>>, hostPattern: RegExp | null = null): ResolvedTarget {
  if (plan.resolved) return plan.resolved;
  if (plan.service) throw new GatehouseError('NO_ENDPOINTS', `Service ${plan.authority} has no ready endpoints`);
  const split = hostEnd(plan.authority);
  const hostTemplate = plan.authority.slice(0, split);
  const authority = substitute(hostTemplate, params, hostPattern ? hostCharsValue : labelValue) + substitute(plan.authority.slice(split), params, portValue);
  const { origin, host, hostname } = resolveAuthority(plan.scheme, authority);
  if (hasPlaceholder(hostTemplate)) {
    if (IP_HOST.test(hostname) || hostname === 'localhost' || hostname.endsWith('.localhost'))
      badHost(`upstream host "${hostname}" is not one a request may choose`);
    if (hostPattern && !hostPattern.test(hostname)) badHost(`upstream host "${hostname}" does not match the target's host_pattern`);
  }
  const path = substitute(plan.path, params, encodePathValue) || '/';
  const query = substitute(plan.query, params, encodeURIComponent);
  return { origin, host, path, query };
}

/** Whether placeholders fill part of the template's host (not only its port): what host_pattern applies to. */
export function hostHasPlaceholder(plan: TargetPlan): boolean {
  return !plan.resolved && !plan.service && hasPlaceholder(plan.authority.slice(0, hostEnd(plan.authority)));
}

/**
 * A target's host_pattern as it runs: anchored and case-insensitive. `field` names it in the error.
 * Throws GatehouseError VALIDATION_FAILED.
 */
export function compileTargetHostPattern(pattern: string, field: string): RegExp {
  try {
    return new RegExp(`^(?:${pattern})$`, 'i');
  } catch (err) {
    throw fieldError(field, `is not a valid regex: ${(err as Error).message}`);
  }
}

/** Origin and Host of a target whose authority has no placeholder (its path may have some); null when the request picks them (or it is a Service). */
export function fixedAuthority(plan: TargetPlan): Pick<ResolvedTarget, 'origin' | 'host'> | null {
  if (plan.resolved) return plan.resolved;
  return hasPlaceholder(plan.authority) || plan.service ? null : resolveAuthority(plan.scheme, plan.authority);
}

/**
 * Validate a target template against the listen_path's parameter names. `field` is e.g.
 * `proxy.upstreams.targets[0].target`, `listenPathField` e.g. `proxy.listen_path`.
 * Throws GatehouseError VALIDATION_FAILED.
 */
export function compileTarget(template: string, paramNames: readonly string[], field: string, listenPathField = 'proxy.listen_path'): TargetPlan {
  const fail = (message: string): never => {
    throw fieldError(field, message);
  };
  if (typeof template !== 'string' || template === '') fail('is required');
  for (const m of template.matchAll(PLACEHOLDER)) {
    if (!paramNames.includes(m[1])) fail(`uses {${m[1]}} which is not defined in ${listenPathField}`);
  }
  let plan = plans.get(template)?.deref();
  if (plan === undefined) {
    plan = Object.freeze(isServiceTarget(template) ? parseServiceTarget(template, fail) : parseTemplate(template, fail));
    plans.delete(template);
    if (plans.size >= MAX_PLANS) plans.delete(plans.keys().next().value!);
    plans.set(template, new WeakRef(plan));
  }
  return plan;
}

/**
 * Plans by template. Many APIs usually share an upstream URL, and a plan depends on its template
 * only (the placeholder check above is per route): a plan of its own per route would cost a data plane heap
 * and URL parses for every API.
 * Plans are frozen, so sharing one is safe; bounded (oldest out first), so a stream of distinct
 * templates on the control plane cannot grow it without end. Held weakly: a plan lives as long as a
 * compiled route holds it (a data plane's routes), not for the map's sake (the control plane keeps no
 * routes: a plan each of 10,000 distinct templates held 7 MB there).
 */
const plans = new Map<string, WeakRef<TargetPlan>>();
const MAX_PLANS = 10_000;

function parseServiceTarget(template: string, fail: (message: string) => never): TargetPlan {
  if (hasPlaceholder(template)) fail('names a Kubernetes Service and takes no placeholders');
  const m = SERVICE_TARGET.exec(template);
  if (!m) fail('is not a valid Kubernetes Service target: k8s://<service>[.<namespace>]:<port number or name>[/path] (k8s+https:// for TLS)');
  const [, scheme = 'http', name, , namespace, , portText, rawPath = '/'] = m!;
  const port = /^[0-9]+$/.test(portText) ? Number(portText) : portText.toLowerCase();
  if (typeof port === 'number' && (port < 1 || port > 65535)) fail('names a port outside 1–65535');
  if (typeof port === 'string' && !/[a-z]/.test(port)) fail('names a port that is neither a number nor a name');
  const path = new URL(`http://x${rawPath}`).pathname;
  const service = { name: name.toLowerCase(), namespace: namespace?.toLowerCase() ?? null, port };
  return {
    scheme: scheme.toLowerCase() as 'http' | 'https',
    authority: `${service.name}${service.namespace ? `.${service.namespace}` : ''}:${port}`,
    path,
    query: '',
    service,
  };
}

/** The plan of a template whose placeholders are known to be listen_path parameters; `fail` throws. */
function parseTemplate(template: string, fail: (message: string) => never): TargetPlan {
  // A placeholder may stand for a host name part or a port: the template is valid when it parses
  // as an absolute http(s) URL with either kind of dummy value.
  const url = ['x', '1']
    .map((dummy) => {
      try {
        return new URL(template.replace(PLACEHOLDER, dummy));
      } catch {
        return null;
      }
    })
    .find((u) => u !== null);
  const parts = TEMPLATE.exec(template);
  if (!url || !parts || !/^https?:$/.test(url.protocol) || url.hostname === '') fail('is not a valid URL');
  if (url!.username || url!.password) fail('must not contain user info');
  const [, scheme, authority, path, query = ''] = parts!;
  const plan: TargetPlan = { scheme: scheme.toLowerCase() as 'http' | 'https', authority, path, query };
  if (!hasPlaceholder(template)) {
    let resolved: Pick<ResolvedTarget, 'origin' | 'host'> | undefined;
    try {
      resolved = resolveAuthority(plan.scheme, authority);
    } catch {
      fail('is not a valid URL');
    }
    const { origin, host } = resolved!;
    // The URL parser's own path normalisation (dot segments, escapes) is what the upstream would see.
    const fixed = new URL(`${plan.scheme}://${authority}${path}`);
    plan.path = fixed.pathname;
    plan.resolved = Object.freeze({ origin, host, path: fixed.pathname, query });
  }
  return plan;
}
