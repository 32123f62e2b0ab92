/**
 * The whole configuration: `export`, `import -f [--dry-run]` (or `--from-janus`: janus/), `history`, `rollback <version>`
 * (GET/PUT /config, GET /config/history, POST /config/rollback/{version}).
 */
import { writeFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { CliError, request } from './admin-http.js';
import { withContext } from './context.js';
import { readDocument } from './documents.js';
import { importFromJanus } from './janus/import-command.js';
import { formatData, formatTable, print } from './output.js';

interface KindDiff {
  added: string[];
  changed: string[];
  removed: string[];
}

interface WriteResult {
  version: number;
  changed?: boolean;
  dry_run?: boolean;
  restored?: number;
  diff: Record<string, KindDiff>;
}

interface HistoryEntry {
  version: number;
  time: string;
  author: string;
  action: string;
  apis: number;
  oauth_servers: number;
  basic_auth_credentials: number;
  /** Absent in entries recorded before key_auth existed. */
  key_auth_credentials?: number;
}

function diffTable(diff: Record<string, KindDiff>): string {
  return formatTable(Object.entries(diff), [
    ['KIND', ([kind]) => kind],
    ['ADDED', ([, d]) => d.added],
    ['CHANGED', ([, d]) => d.changed],
    ['REMOVED', ([, d]) => d.removed],
  ]);
}

function printWrite(output: string, result: WriteResult, headline: string): void {
  if (output === 'json') {
    console.log(JSON.stringify(result, null, 2));
    return;
  }
  console.log(headline);
  console.log(diffTable(result.diff));
}

export function addConfigCommands(program: Command): void {
  program
    .command('export')
    .description('print the whole configuration (YAML; --output json for JSON); secrets shown as "<redacted>" (importing the file back keeps them)')
    .option('-f, --file <file>', 'write it to this file (mode 0600) instead of stdout')
    .option('--include-secrets', 'include the secrets and hashes as stored (admin only; the control plane logs it)')
    .action(
      withContext(async (ctx, options: { file?: string; includeSecrets?: boolean }) => {
        const { body } = await request(await ctx.connection(), 'GET', options.includeSecrets ? '/config?secrets=include' : '/config');
        const text = `${formatData(body, ctx.output === 'json' ? 'json' : 'yaml')}\n`;
        if (!options.file) {
          process.stdout.write(text);
          return;
        }
        // It holds upstream addresses (and, with --include-secrets, keys and password hashes).
        await writeFile(options.file, text, { mode: 0o600 });
        console.error(`configuration written to ${options.file}`);
      }),
    );

  program
    .command('import')
    .description(
      'replace the whole configuration with a file (as `export` writes it); validated as a whole first. With --from-janus: import a Janus configuration (a dry run unless --apply)',
    )
    .option('-f, --file <file>', 'YAML or JSON configuration (- = stdin)')
    .option('--dry-run', 'only show what would change')
    .option('--from-janus <source...>', 'Janus file-store directory, mongoexport file(s) or admin API URL')
    .option('--apply', 'with --from-janus: write the import (one version in the history)')
    .option('--skip-refused', 'with --apply: import the rest when items are refused')
    .option('--janus-user <username>', 'Janus admin API user (default: JANUS_USER)')
    .option('--janus-password <password>', 'Janus admin API password (default: JANUS_PASSWORD)')
    .addHelpText('after', '\nExit codes with --from-janus: 0 nothing needs action, 3 changes to review, 4 refused items or users to reset, 1 error, 2 usage.')
    .action(
      withContext(
        async (
          ctx,
          options: {
            file?: string;
            dryRun?: boolean;
            fromJanus?: string[];
            apply?: boolean;
            skipRefused?: boolean;
            janusUser?: string;
            janusPassword?: string;
          },
        ) => {
          if (options.fromJanus) {
            if (options.file) throw new CliError('--file and --from-janus cannot be given together', 2);
            if (options.dryRun && options.apply) throw new CliError('--dry-run and --apply cannot be given together', 2);
            process.exitCode = await importFromJanus(ctx, options.fromJanus, {
              apply: options.apply,
              skipRefused: options.skipRefused,
              username: options.janusUser,
              password: options.janusPassword,
            });
            return;
          }
          if (!options.file) throw new CliError('import needs --file (or --from-janus)', 2);
          if (options.apply || options.skipRefused)
            throw new CliError('--apply and --skip-refused go with --from-janus (a file import writes unless --dry-run)', 2);
          const doc = await readDocument(options.file);
          const path = options.dryRun ? '/config?dry_run=true' : '/config';
          const result = (await request(await ctx.connection(), 'PUT', path, doc)).body as WriteResult;
          const headline = result.dry_run
            ? `dry run: nothing written (current version ${result.version})`
            : result.changed
              ? `configuration replaced: now version ${result.version}`
              : `configuration unchanged (version ${result.version})`;
          printWrite(ctx.output, result, headline);
        },
      ),
    );

  program
    .command('history')
    .description('list the kept versions of the configuration, newest first')
    .action(
      withContext(async (ctx) => {
        const { body } = await request(await ctx.connection(), 'GET', '/config/history');
        print<HistoryEntry>(ctx.output, body as HistoryEntry[], [
          ['VERSION', (e) => e.version],
          ['TIME', (e) => e.time],
          ['AUTHOR', (e) => e.author],
          ['ACTION', (e) => e.action],
          ['APIS', (e) => e.apis],
          ['OAUTH SERVERS', (e) => e.oauth_servers],
          ['USERS', (e) => e.basic_auth_credentials],
          ['API KEYS', (e) => e.key_auth_credentials ?? 0],
        ]);
      }),
    );

  program
    .command('rollback')
    .argument('<version>', 'a version listed by `gatehouse history`')
    .description('restore a kept version of the configuration (itself a new version)')
    .action(
      withContext(async (ctx, version: string) => {
        if (!/^\d+$/.test(version)) throw new CliError(`version must be a number, got "${version}"`, 2);
        const result = (await request(await ctx.connection(), 'POST', `/config/rollback/${version}`)).body as WriteResult;
        const headline = result.changed
          ? `restored version ${result.restored}: now version ${result.version}`
          : `version ${result.restored} is already the configuration (version ${result.version})`;
        printWrite(ctx.output, result, headline);
      }),
    );
}
