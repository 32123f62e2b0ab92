/**
 * API definitions: raw admin JSON → normalised ApiDefinition (defaults filled, aliases folded).
 *
 * Unknown members are stripped silently at every level (clients written for Janus send extra
 * fields such as `health_check` or `proxy.upstreams.options`); members set to null count as absent.
 * Target `weight` is always kept (default 1), whatever the balancing, so what is shown is what runs.
 */
import { z } from 'zod';
import { dedupe, EMPTY_LIST, hostSchema, normalizeProxy, proxySchema } from './proxy-schema.js';
import { check, dropNulls, isPlainObject, validationError } from './field-path.js';
import { nameSchema } from './name.js';
import { isPluginName, parsePluginConfig } from '../plugins/index.js';
import type { ApiDefinition, PluginDefinition } from './types.js';

/**
 * A plugin's `config` is checked by that plugin's own schema (proto/src/plugins), once the whole
 * definition has passed: errors name the field under it (`plugins[1].config.domains[0] ...`). Here
 * it is any value, so the CRD keeps it whole (x-kubernetes-preserve-unknown-fields).
 */
const pluginSchema = z.object({
  name: z
    .string()
    .min(1, 'is required')
    .superRefine((name, ctx) => {
      if (!isPluginName(name)) {
        ctx.addIssue({ code: 'custom', input: name, message: `: unknown plugin ${JSON.stringify(name)}` });
      }
    }),
  enabled: z.boolean().default(true),
  config: z.unknown().optional(),
});

export const apiSchema = z.object({
  name: nameSchema,
  active: z.boolean().default(true),
  hosts: z.array(hostSchema).optional(),
  proxy: proxySchema,
  plugins: z.array(pluginSchema).default(() => []),
});

/** Seed routing rule 1, judged on the input as given (before `methods` defaults to ALL). */
function hasRoutingCondition(raw: Record<string, unknown>): boolean {
  const proxy = isPlainObject(raw.proxy) ? raw.proxy : {};
  const nonEmpty = (v: unknown) => Array.isArray(v) && v.length > 0;
  return (
    nonEmpty(raw.hosts) ||
    nonEmpty(proxy.hosts) ||
    (proxy.listen_path !== undefined && proxy.listen_path !== '') ||
    proxy.methods !== undefined ||
    (isPlainObject(proxy.match_headers) && Object.keys(proxy.match_headers).length > 0)
  );
}

export function parseApiDefinition(input: unknown): ApiDefinition {
  if (!isPlainObject(input)) throw validationError([], 'definition must be a JSON object');
  const raw = dropNulls(input) as Record<string, unknown>;
  const result = check(apiSchema, raw);
  // Precedence of problems: the name, then the missing routing condition, then the rest in field order.
  if (!result.ok && result.path[0] === 'name') throw result.error;
  if (!hasRoutingCondition(raw)) throw validationError(['proxy', 'listen_path'], 'is required');
  if (!result.ok) throw result.error;
  const parsed = result.data;

  const plugins =
    parsed.plugins.length === 0
      ? EMPTY_LIST
      : parsed.plugins.map((p, i): PluginDefinition => {
          if (parsed.plugins.findIndex((q) => q.name === p.name) < i) {
            throw validationError(['plugins', i, 'name'], `: duplicate plugin ${JSON.stringify(p.name)}`);
          }
          const name = p.name as PluginDefinition['name'];
          // A missing config is {}: `plugins[0].config.server_name is required` rather than `config is required`.
          const config = parsePluginConfig(name, p.config ?? {}, ['plugins', i, 'config']);
          return { name, enabled: p.enabled, config } as PluginDefinition;
        });

  return {
    name: parsed.name,
    active: parsed.active,
    hosts: dedupe([...(parsed.hosts ?? []), ...(parsed.proxy.hosts ?? [])].map((h) => h.toLowerCase())),
    proxy: normalizeProxy(parsed.proxy),
    plugins,
  };
}
