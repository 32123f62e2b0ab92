import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import { createRequire } from 'node:module';
import { oneOf, readVariable } from './env.js';

export type { Logger };

export type LogFormat = 'json' | 'pretty';

/** LOG_FORMAT: `json` (default, one object a line) or `pretty` (for people). */
export const LOG_FORMAT = oneOf<LogFormat>(['json', 'pretty'], 'json');

/** LOG_FORMAT read alone; throws a ConfigError naming the variable. */
export function logFormatOf(env: NodeJS.ProcessEnv): LogFormat {
  return readVariable(env, 'LOG_FORMAT', LOG_FORMAT);
}

/** LOG_LEVEL: one of pino's levels (default info). */
export const LOG_LEVEL = oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], 'info');

/**
 * pino-pretty, run in this thread on each line as it is written (no worker): a line logged just
 * before process.exit() is never lost. `service` is left out: `npm start` prefixes each line with it.
 */
export function prettyLogLine(colorize?: boolean): (line: string) => string {
  // Required here, not imported with this module: json logs (the default) never load it, nor pay for it at start.
  const pinoPretty = createRequire(import.meta.url)('pino-pretty') as typeof import('pino-pretty');
  return pinoPretty.prettyFactory({ translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service', singleLine: true, colorize });
}

function prettyDestination(): DestinationStream {
  const out = pino.destination({ dest: 1, sync: true });
  const pretty = prettyLogLine(process.stdout.isTTY);
  return { write: (line: string) => out.write(pretty(line)) };
}

/**
 * Structured logs to stdout; LOG_LEVEL (default info), LOG_FORMAT (default json; an unknown value
 * is reported by the service's config, meanwhile json). Secrets never go into log fields.
 */
export function createLogger(
  service: 'control-plane' | 'data-plane',
  level = process.env.LOG_LEVEL ?? 'info',
  format: string | undefined = process.env.LOG_FORMAT,
): Logger {
  const options: LoggerOptions = {
    level,
    base: { service },
    redact: { paths: ['password', '*.password', 'authorization', '*.authorization', 'req.headers.authorization'], remove: true },
  };
  return format === 'pretty' ? pino(options, prettyDestination()) : pino(options);
}
