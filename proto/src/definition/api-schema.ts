/**
 * API definitions: raw admin JSON → normalised ApiDefinition (defaults filled, aliases folded).
 *
 * Unknown members are stripped silently at every level (clients written for Janus send extra
 * fields such as `health_check` or `proxy.upstreams.options`); members set to null count as absent.
 * Target `weight` is always kept (default 1), whatever the balancing, so what is shown is what runs.
 */
import { z } from 'zod';
import { dedupe, hostSchema, normalizeProxy, proxySchema } from './proxy-schema.js';
import { check, dropNulls, isPlainObject, validationError } from './field-path.js';
import { nameSchema } from './name.js';
import type { ApiDefinition, PluginDefinition } from './types.js';

const KNOWN_PLUGINS = ['oauth2'];

const pluginSchema = z.object({
  name: z
    .string()
    .min(1, 'is required')
    .superRefine((name, ctx) => {
      if (!KNOWN_PLUGINS.includes(name)) {
        ctx.addIssue({ code: 'custom', input: name, message: `: unknown plugin ${JSON.stringify(name)}` });
      }
    }),
  enabled: z.boolean().default(true),
  // prefault: a missing config reports `plugins[0].config.server_name is required`.
  config: z.object({ server_name: z.string().min(1, 'is required') }).prefault({} as never),
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
    proxy.methods !== undefined
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

  const plugins: PluginDefinition[] = [];
  parsed.plugins.forEach((p, i) => {
    if (plugins.some((q) => q.name === p.name)) {
      throw validationError(['plugins', i, 'name'], `: duplicate plugin ${JSON.stringify(p.name)}`);
    }
    plugins.push({ name: 'oauth2', enabled: p.enabled, config: { server_name: p.config.server_name } });
  });

  return {
    name: parsed.name,
    active: parsed.active,
    hosts: dedupe([...(parsed.hosts ?? []), ...(parsed.proxy.hosts ?? [])].map((h) => h.toLowerCase())),
    proxy: normalizeProxy(parsed.proxy),
    plugins,
  };
}
