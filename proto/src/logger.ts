import { pino, type Logger } from 'pino';

export type { Logger };

/** Structured JSON logs to stdout; LOG_LEVEL (default info). Secrets never go into log fields. */
export function createLogger(service: 'control-plane' | 'data-plane', level = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({
    level,
    base: { service },
    redact: { paths: ['password', '*.password', 'authorization', '*.authorization', 'req.headers.authorization'], remove: true },
  });
}
