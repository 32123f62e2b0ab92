/**
 * What every command gets from the global options: the output format and the connection
 * (--server / GATEHOUSE_URL / the last login's server, with the session's token).
 */
import type { Command } from 'commander';
import { resolveConnection, type Connection } from './admin-http.js';
import { parseOutputFormat, type OutputFormat } from './output.js';

export interface CliContext {
  output: OutputFormat;
  connection(): Promise<Connection>;
}

export function contextOf(command: Command): CliContext {
  const globals = command.optsWithGlobals<{ server?: string; output: string }>();
  const output = parseOutputFormat(globals.output);
  return { output, connection: () => resolveConnection(globals.server) };
}

/** A command's action with its context: commander passes the Command last. */
export function withContext<A extends unknown[]>(run: (ctx: CliContext, ...args: A) => Promise<void>): (...args: unknown[]) => Promise<void> {
  return async (...args) => {
    const command = args[args.length - 1] as Command;
    await run(contextOf(command), ...(args.slice(0, -1) as A));
  };
}
