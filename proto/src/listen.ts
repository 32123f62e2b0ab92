import type { Server } from 'node:net';
import { createLogger, type Logger } from './logger.js';

/** Bind a server and resolve with the port it got (PORT=0 means ephemeral); reject on a bind error. */
export function listen(server: Server, port: number, host?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const address = server.address();
      resolve(typeof address === 'object' && address ? address.port : port);
    });
  });
}

/** A listener as the operator configures it: its name in the "listening" line and its variables. */
export interface ListenerSetting {
  listener: string;
  /** e.g. `ADMIN_PORT` */
  portVariable: string;
  /** e.g. `ADMIN_HOST` */
  hostVariable: string;
  port: number;
  host: string | undefined;
}

/** A listener that could not bind: the message names the variable and the port, and is meant to be the whole report. */
export class ListenError extends Error {
  override readonly name = 'ListenError';
  constructor(
    message: string,
    readonly setting: ListenerSetting,
    /** The system's code (`EADDRINUSE`, `EACCES`, …) when one was recognised. */
    readonly code: string | undefined,
  ) {
    super(message);
  }
}

/** node:net errors carry `code`; grpc-js only writes it into the message (`listen EADDRINUSE: …`). */
function systemCodeOf(err: unknown): string | undefined {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (typeof code === 'string') return code;
  const message = err instanceof Error ? err.message : String(err);
  if (/Name resolution failed/i.test(message)) return 'ENOTFOUND';
  return /\b(EADDRINUSE|EACCES|EADDRNOTAVAIL|ENOTFOUND|EAI_AGAIN|EINVAL)\b/.exec(message)?.[1];
}

export function listenErrorOf(err: unknown, setting: ListenerSetting): ListenError {
  const { portVariable, hostVariable, port, host } = setting;
  const code = systemCodeOf(err);
  const where = `${portVariable} ${port}`;
  let message: string;
  switch (code) {
    case 'EADDRINUSE':
      message = `${where} is already in use${host ? ` on ${host}` : ''}`;
      break;
    case 'EACCES':
      message = `${where} may not be bound by this user (ports below 1024 need root or CAP_NET_BIND_SERVICE)`;
      break;
    case 'EADDRNOTAVAIL':
      message = `${hostVariable} ${host} is not an address of this machine (${where})`;
      break;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      message = `${hostVariable} ${host} does not resolve to an address (${where})`;
      break;
    default:
      message = `${where} could not be bound${host ? ` on ${host}` : ''}: ${err instanceof Error ? err.message : String(err)}`;
  }
  return new ListenError(message, setting, code);
}

/** Runs `bind` (any listener's listen), turning its failure into a ListenError for `setting`. */
export async function bindListener(setting: ListenerSetting, bind: () => Promise<number>): Promise<number> {
  try {
    return await bind();
  } catch (err) {
    throw listenErrorOf(err, setting);
  }
}

/**
 * The last words of a service that could not start: a listen failure is one line naming the
 * variable and the port (no stack: the operator's fix is in the message); anything else keeps its error.
 */
export function logStartFailure(logger: Logger, err: unknown, message: string): void {
  if (err instanceof ListenError) {
    logger.fatal({ listener: err.setting.listener, port: err.setting.port, code: err.code }, err.message);
  } else {
    logger.fatal({ err }, message);
  }
}

/** A malformed variable is the operator's to fix: one line naming it, no stack, exit 1. At info level: LOG_LEVEL itself may be what is wrong. */
export function exitOnInvalidConfiguration(service: 'control-plane' | 'data-plane', err: unknown): never {
  // `ConfigError: NAME: problem; NAME: problem`: every bad variable on the one line.
  createLogger(service, 'info').fatal({ err: String(err) }, 'invalid configuration');
  process.exit(1);
}

/** Called when a shutdown starts: should one of its steps hang, still leave (exit 1) 5 s past the drain bound; the orchestrator is about to kill us anyway. */
export function exitIfShutdownHangs(logger: Logger, shutdownTimeoutMs: number): void {
  setTimeout(() => {
    logger.error('shutdown did not complete in time');
    process.exit(1);
  }, shutdownTimeoutMs + 5_000).unref();
}
