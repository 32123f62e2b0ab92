#!/usr/bin/env node
/**
 * `gatehouse`: the admin API from a terminal or a script. Tables for people by default,
 * `--output json` for scripts; every failure is one line on stderr and a non-zero exit
 * (1: the API or the network said no; 2: the command line is wrong).
 */
import { Command, CommanderError, Option } from 'commander';
import { CliError } from './admin-http.js';
import { addConfigCommands } from './config-commands.js';
import { addCredentialCommands } from './credential-commands.js';
import { addLoginCommands } from './login-command.js';
import { OUTPUT_FORMATS } from './output.js';
import { addResourceCommands } from './resource-commands.js';
import { addStatusCommands } from './status-commands.js';

const USAGE_EXIT = 2;

function buildProgram(): Command {
  const program = new Command('gatehouse')
    .description('Gatehouse API gateway administration')
    .addOption(new Option('-s, --server <url>', 'admin API URL (default: GATEHOUSE_URL, else the server of the last login, else http://127.0.0.1:8081)'))
    .addOption(new Option('-o, --output <format>', 'output format').choices(OUTPUT_FORMATS).default('table'))
    .showHelpAfterError('(gatehouse --help lists the commands)')
    .exitOverride();
  addLoginCommands(program);
  addResourceCommands(program);
  addCredentialCommands(program);
  addStatusCommands(program);
  addConfigCommands(program);
  // Sub-commands report usage errors the same way.
  program.commands.forEach(function override(cmd: Command) {
    cmd.exitOverride();
    cmd.commands.forEach(override);
  });
  return program;
}

async function main(argv: string[]): Promise<number> {
  try {
    await buildProgram().parseAsync(argv);
    // A command may set its own exit code (import --from-janus: what needs action).
    return Number(process.exitCode ?? 0);
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : USAGE_EXIT;
    if (err instanceof CliError) {
      console.error(`error: ${err.message}`);
      return err.exitCode;
    }
    console.error(`error: ${(err as Error)?.stack ?? String(err)}`);
    return 1;
  }
}

process.exitCode = await main(process.argv);
