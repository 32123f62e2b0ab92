/**
 * Environment variables of the control plane and the data plane, read by one parser: each process declares a zod
 * schema of its variables from the pieces below, then checks what relates several of them. Every problem found
 * is one `NAME: what is wrong` line of a single ConfigError, so a start reports all its bad variables at once.
 */
import { z } from 'zod';
import { tryParseDuration } from './duration.js';
import { parseIpRange, wordRange, type WordRange } from './plugins/ip-restriction.js';

export interface EnvProblem {
  /** The variable, e.g. PROXY_PORT. */
  name: string;
  /** What is wrong with it, e.g. `expected a port number 0-65535, got "http"`. */
  message: string;
}

export class ConfigError extends Error {
  override name = 'ConfigError';

  constructor(readonly problems: readonly EnvProblem[]) {
    super(problems.map((p) => `${p.name}: ${p.message}`).join('; '));
  }
}

/** One problem with one variable, for the readers of a few variables outside a process schema (logger, tracing, certificate pairs). */
export function envProblem(name: string, message: string): ConfigError {
  return new ConfigError([{ name, message }]);
}

/**
 * A variable parsed from its text; unset or empty is `fallback`. `parse` returns null for a malformed text,
 * which is then reported as `expected <expected>, got "<text>"`.
 */
export function variable<T>(expected: string, parse: (text: string) => T | null, fallback: T) {
  return z
    .string()
    .optional()
    .transform((text, ctx): T => {
      if (text === undefined || text === '') return fallback;
      const value = parse(text);
      if (value !== null) return value;
      ctx.issues.push({ code: 'custom', input: text, message: `expected ${expected}, got "${text}"` });
      return z.NEVER;
    });
}

/** Free text; unset or empty is `fallback`. */
export function text<F extends string | undefined = undefined>(fallback?: F) {
  return z
    .string()
    .optional()
    .transform((s) => (s || fallback) as string | F);
}

export function port<T extends number | null>(fallback: T) {
  return variable<number | T>('a port number 0-65535', (s) => (/^\d+$/.test(s) && Number(s) <= 65535 ? Number(s) : null), fallback);
}

export function integer(min: number, max: number, fallback: number) {
  const expected = max === Number.MAX_SAFE_INTEGER ? `an integer of at least ${min}` : `an integer ${min}-${max}`;
  return variable(expected, (s) => (/^\d+$/.test(s) && Number(s) >= min && Number(s) <= max ? Number(s) : null), fallback);
}

/** A duration such as "250ms", "10s", "1m30s" (more than 0, at most 1h), in milliseconds. */
export function duration(fallback: string) {
  return variable('a duration such as "500ms" or "30s" (at most 1h)', tryParseDuration, tryParseDuration(fallback)!);
}

/** A duration, or zero ("0", "0s", "0.0ms"…), which turns off what it times. */
export function durationOrZero(fallback: string) {
  const parse = (s: string) => (/^0+(\.0*)?(ms|s|m|h)?$/.test(s) ? 0 : tryParseDuration(s));
  return variable('"0" or a duration such as "500ms" or "30s" (at most 1h)', parse, parse(fallback)!);
}

export function boolean(fallback: boolean) {
  return oneOf(['true', 'false'], fallback ? 'true' : 'false').transform((s) => s === 'true');
}

/** One of a few words. */
export function oneOf<const T extends string>(values: readonly T[], fallback: NoInfer<T>) {
  const expected = values.length === 2 ? `"${values[0]}" or "${values[1]}"` : `one of ${values.join(', ')}`;
  return variable(expected, (s) => (values.includes(s as T) ? (s as T) : null), fallback);
}

/** A comma-separated list (blanks around entries and empty entries dropped); every entry must pass `valid`. */
export function list(expected: string, valid: (entry: string) => boolean = () => true) {
  return z
    .string()
    .optional()
    .transform((s, ctx) => {
      const entries = (s ?? '')
        .split(',')
        .map((e) => e.trim())
        .filter(Boolean);
      const bad = entries.find((e) => !valid(e));
      if (bad === undefined) return entries;
      ctx.issues.push({ code: 'custom', input: s, message: `expected ${expected}, got "${bad}"` });
      return z.NEVER;
    });
}

/** Two variables that only make sense together (a certificate and its key): both set, or neither (null); empty is unset. */
export function bothOrNeither(env: NodeJS.ProcessEnv, first: string, second: string): [string, string] | null {
  const a = env[first] || undefined;
  const b = env[second] || undefined;
  if (a && !b) throw envProblem(first, `needs ${second} (both or neither)`);
  if (b && !a) throw envProblem(second, `needs ${first} (both or neither)`);
  return a && b ? [a, b] : null;
}

/** One variable read with its piece, outside a process schema; throws a ConfigError naming it. */
export function readVariable<T>(env: NodeJS.ProcessEnv, name: string, piece: z.ZodType<T, string | undefined>): T {
  const parsed = piece.safeParse(env[name]);
  if (!parsed.success) throw new ConfigError(parsed.error.issues.map((issue) => ({ name, message: issue.message })));
  return parsed.data;
}

/** Comma-separated IP addresses and CIDR ranges ("10.0.0.0/8, 2001:db8::/32"); unset or blank is none. */
export function cidrList() {
  return z
    .string()
    .optional()
    .transform((s, ctx): readonly WordRange[] => {
      if (s === undefined || s.trim() === '') return Object.freeze([]);
      const entries = s.split(',').map((e) => e.trim());
      const bad = entries.find((e) => parseIpRange(e.toLowerCase()) === null);
      if (bad === undefined) return Object.freeze(entries.map((e) => wordRange(e.toLowerCase())));
      const expected = 'IP addresses and CIDR ranges such as "10.0.0.0/8" or "2001:db8::/32", separated by commas';
      ctx.issues.push({ code: 'custom', input: s, message: `expected ${expected}, got "${bad}"` });
      return z.NEVER;
    });
}

/**
 * Problems found by the checks that relate several variables, collected so that they are reported together
 * (`attempt` takes those a reader outside the schema raised as a ConfigError).
 */
export class EnvChecks {
  readonly problems: EnvProblem[] = [];

  /** The variables of `schema` read from `env`; undefined (its problems kept) when one is malformed. */
  parse<S extends z.ZodRawShape>(env: NodeJS.ProcessEnv, schema: z.ZodObject<S>): z.output<z.ZodObject<S>> | undefined {
    const parsed = schema.safeParse(env);
    if (parsed.success) return parsed.data;
    for (const issue of parsed.error.issues) this.fail(String(issue.path[0]), issue.message);
    return undefined;
  }

  fail(name: string, message: string): void {
    this.problems.push({ name, message });
  }

  attempt<T>(read: () => T): T | undefined {
    try {
      return read();
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      this.problems.push(...err.problems);
      return undefined;
    }
  }
}

/**
 * The variables of `schema` read from `env`, then `relate` (given them and an EnvChecks) builds the configuration.
 * Throws one ConfigError holding every problem: the schema's, else those `relate` found.
 */
export function parseEnv<S extends z.ZodRawShape, T>(
  env: NodeJS.ProcessEnv,
  schema: z.ZodObject<S>,
  relate: (vars: z.output<z.ZodObject<S>>, checks: EnvChecks) => T,
): T {
  const checks = new EnvChecks();
  const vars = checks.parse(env, schema);
  const config = vars && relate(vars, checks);
  if (checks.problems.length > 0 || vars === undefined) throw new ConfigError(checks.problems);
  return config as T;
}
