/**
 * The one shape of a plugin's configuration side, shared by the control plane (validation at write
 * time) and the data plane (compile once per snapshot). Pure: no I/O, no clock, no module state.
 *
 * - `schema` reads Janus's configuration format and outputs the normalised config (defaults
 *   filled, canonical forms): what is stored, shown by the admin API and sent in snapshots, so what
 *   is shown is what runs. Its messages follow field-path.ts ("is required", ": ..." to follow the path).
 * - `compile` turns a normalised config into what the data plane runs per request: plain, frozen,
 *   everything parsed once (wildcards → matchers, "1M" → bytes, header lists → lower-cased sets).
 *
 * The runtime side lives in data-plane/src/plugins/ (one module per plugin, one registry line).
 */
import type { z } from 'zod';

export interface PluginModule<Config, Compiled> {
  readonly schema: z.ZodType<Config>;
  compile(config: Config): Compiled;
}

/** Identity with inference: `definePlugin({ schema, compile })` keeps both types. */
export function definePlugin<Config, Compiled>(module: PluginModule<Config, Compiled>): PluginModule<Config, Compiled> {
  return module;
}

/** Freezes a compiled config (and what it holds), so a snapshot's plugins cannot be changed by a request. */
export function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  if (value instanceof Set || value instanceof Map) {
    for (const item of value.values()) deepFreeze(item);
  } else {
    for (const item of Object.values(value)) deepFreeze(item);
  }
  return Object.freeze(value);
}
