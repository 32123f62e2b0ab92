/**
 * `gatehouse apis|oauth-servers list|get|apply -f|delete`. `apply` makes the server hold exactly
 * what the file says: POST when the name is new, else a PUT whose merge patch also removes the
 * members the file leaves out (the server then fills its defaults).
 */
import type { Command } from 'commander';
import { CliError, request } from './admin-http.js';
import { withContext } from './context.js';
import { mergePatchBetween, readDocuments } from './documents.js';
import { print, type Column } from './output.js';

// biome-ignore lint/suspicious/noExplicitAny: an admin API answer, untyped JSON read field by field for display.
type Definition = Record<string, any>;

interface ResourceKind {
  command: string;
  description: string;
  /** Admin API collection path. */
  path: string;
  /** How results name an item: `api/users`. */
  singular: string;
  columns: Column<Definition>[];
}

const targetsOf = (proxy: Definition | undefined) => (proxy?.upstreams?.targets ?? []).map((t: Definition) => t.target);

export const RESOURCE_KINDS: ResourceKind[] = [
  {
    command: 'apis',
    description: 'API definitions',
    path: '/apis',
    singular: 'api',
    columns: [
      ['NAME', (a) => a.name],
      ['ACTIVE', (a) => a.active],
      ['LISTEN PATH', (a) => a.proxy?.listen_path],
      ['HOSTS', (a) => a.hosts],
      ['METHODS', (a) => a.proxy?.methods],
      ['TARGETS', (a) => targetsOf(a.proxy)],
      ['PLUGINS', (a) => (a.plugins ?? []).map((p: Definition) => p.name)],
    ],
  },
  {
    command: 'oauth-servers',
    description: 'OAuth servers',
    path: '/oauth/servers',
    singular: 'oauth-server',
    columns: [
      ['NAME', (s) => s.name],
      ['STRATEGY', (s) => s.token_strategy?.name],
      ['TOKEN PATH', (s) => s.oauth_endpoints?.token?.listen_path],
      ['ENDPOINTS', (s) => Object.keys(s.oauth_endpoints ?? {})],
      ['TARGETS', (s) => targetsOf(s.oauth_endpoints?.token)],
    ],
  },
];

interface ApplyResult {
  kind: string;
  name: string;
  result: 'created' | 'configured' | 'unchanged';
}

const itemPath = (kind: ResourceKind, name: string) => `${kind.path}/${encodeURIComponent(name)}`;

export function addResourceCommands(program: Command): void {
  for (const kind of RESOURCE_KINDS) {
    const group = program.command(kind.command).description(`list, show, apply and delete ${kind.description}`);

    group
      .command('list')
      .description(`list ${kind.description}`)
      .action(
        withContext(async (ctx) => {
          const { body } = await request(await ctx.connection(), 'GET', kind.path);
          print(ctx.output, body as Definition[], kind.columns);
        }),
      );

    group
      .command('get')
      .argument('<name>')
      .description(`show one of the ${kind.description}`)
      .action(
        withContext(async (ctx, name: string) => {
          const { body } = await request(await ctx.connection(), 'GET', itemPath(kind, name));
          print(ctx.output, body as Definition, kind.columns);
        }),
      );

    group
      .command('apply')
      .requiredOption('-f, --file <file>', 'YAML or JSON: one definition, a list, or several YAML documents (- = stdin)')
      .description(`create or replace ${kind.description} from a file`)
      .action(
        withContext(async (ctx, options: { file: string }) => {
          const conn = await ctx.connection();
          const docs = await readDocuments(options.file);
          if (docs.length === 0) throw new CliError(`${options.file} holds no definition`);
          const existing = new Map(((await request(conn, 'GET', kind.path)).body as Definition[]).map((d) => [d.name, d]));
          const results: ApplyResult[] = [];
          try {
            for (const [index, doc] of docs.entries()) {
              const name = (doc as Definition | null)?.name;
              if (typeof name !== 'string' || name === '') throw new CliError(`${options.file}: definition ${index + 1} has no name`);
              const stored = existing.get(name);
              let result: ApplyResult['result'];
              if (!stored) {
                await request(conn, 'POST', kind.path, doc);
                result = 'created';
              } else {
                const { body } = await request(conn, 'PUT', itemPath(kind, name), mergePatchBetween(stored, doc));
                result = JSON.stringify(body) === JSON.stringify(stored) ? 'unchanged' : 'configured';
              }
              results.push({ kind: kind.singular, name, result });
              if (ctx.output !== 'json') console.log(`${kind.singular}/${name} ${result}`);
            }
          } finally {
            if (ctx.output === 'json') console.log(JSON.stringify(results, null, 2));
          }
        }),
      );

    addDeleteCommand(group, kind.description, kind.path, kind.singular, 'name');
  }
}

/**
 * `<group> delete <names...>`: one DELETE per name, in order, each reported (`api/users deleted`); with
 * `-o json`, the list of those deleted, also when a later one failed. `member` names the item in that list.
 */
export function addDeleteCommand(group: Command, description: string, collection: string, singular: string, member: 'name' | 'username'): void {
  group
    .command('delete')
    .argument(`<${member}s...>`)
    .description(`delete ${description}`)
    .action(
      withContext(async (ctx, names: string[]) => {
        const conn = await ctx.connection();
        const deleted: string[] = [];
        try {
          for (const name of names) {
            await request(conn, 'DELETE', `${collection}/${encodeURIComponent(name)}`);
            deleted.push(name);
            if (ctx.output !== 'json') console.log(`${singular}/${name} deleted`);
          }
        } finally {
          if (ctx.output === 'json')
            console.log(
              JSON.stringify(
                deleted.map((name) => ({ kind: singular, [member]: name, result: 'deleted' })),
                null,
                2,
              ),
            );
        }
      }),
    );
}
