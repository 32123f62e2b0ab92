/**
 * `gatehouse import --from-janus SOURCE...`: reads a Janus configuration, translates it (translate.ts)
 * and prints one line per item. A dry run by default; with a login it is also validated by the
 * control plane (`PUT /config?dry_run=true`). `--apply` writes the result with one `PUT /config`
 * (the current configuration plus the imported items, same names replaced): one version in the
 * history, so one rollback undoes it.
 */
import { CliError, request, type Connection } from '../admin-http.js';
import type { CliContext } from '../context.js';
import { formatData, formatTable } from '../output.js';
import { readJanus, type JanusAdminCredentials } from './sources.js';
import { translateAll, type ItemReport } from './translate.js';

/** Exit codes of the import (1: an error, 2: the command line, as every command). */
export const EXIT_CHANGES = 3;
export const EXIT_ACTION_NEEDED = 4;

export interface JanusImportOptions extends JanusAdminCredentials {
  apply?: boolean;
  skipRefused?: boolean;
}

interface ConfigDocument {
  apis: Record<string, unknown>[];
  oauth_servers: Record<string, unknown>[];
  basic_auth_credentials: Record<string, unknown>[];
  key_auth_credentials: Record<string, unknown>[];
}

interface WriteResult {
  version: number;
  changed?: boolean;
  diff: Record<string, { added: string[]; changed: string[]; removed: string[] }>;
}

const MEMBER = { api: 'apis', oauth_server: 'oauth_servers', basic_auth_user: 'basic_auth_credentials' } as const;

/** The current configuration with the imported items added, or replacing those of the same name. */
function merged(current: ConfigDocument, items: ItemReport[]): ConfigDocument {
  const doc: ConfigDocument = { ...current };
  for (const [kind, member] of Object.entries(MEMBER) as [ItemReport['kind'], (typeof MEMBER)[ItemReport['kind']]][]) {
    const key = kind === 'basic_auth_user' ? 'username' : 'name';
    const imported = items.filter((i) => i.kind === kind && i.definition).map((i) => i.definition!);
    const names = new Set(imported.map((d) => d[key]));
    doc[member] = [...(current[member] ?? []).filter((d) => !names.has(d[key])), ...imported];
  }
  return doc;
}

function details(item: ItemReport): string {
  const parts = [
    ...(item.reason ? [item.submitted ? `${item.reason} (--apply submits it: the control plane decides)` : item.reason] : []),
    ...item.changes,
    ...item.differences.map((d) => `not kept: ${d}`),
  ];
  return parts.join('; ');
}

export function reportTable(items: ItemReport[]): string {
  if (items.length === 0) return 'Nothing found to import.';
  return formatTable(items, [
    ['KIND', (i) => i.kind],
    ['NAME', (i) => i.name],
    ['STATUS', (i) => i.status],
    ['DETAILS', (i) => details(i)],
  ]);
}

/** 0: nothing needs action; 3: changes to review; 4: refused items or users to reset. */
export function exitCodeOf(items: ItemReport[]): number {
  if (items.some((i) => i.status === 'refused' || i.status === 'reset')) return EXIT_ACTION_NEEDED;
  if (items.some((i) => i.status === 'changed')) return EXIT_CHANGES;
  return 0;
}

async function write(conn: Connection, items: ItemReport[], dryRun: boolean): Promise<WriteResult & { before: string }> {
  const got = await request(conn, 'GET', '/config');
  const doc = merged(got.body as ConfigDocument, items);
  // Written only over the version read: a write made in between is not undone (412 instead).
  const etag = got.headers.get('etag');
  try {
    const result = (await request(conn, 'PUT', dryRun ? '/config?dry_run=true' : '/config', doc, etag ? { headers: { 'if-match': etag } } : {}))
      .body as WriteResult;
    return { ...result, before: got.headers.get('x-snapshot-version') ?? '?' };
  } catch (err) {
    if (err instanceof CliError && err.message.endsWith('(HTTP 412)'))
      throw new CliError(`the configuration changed while the import ran, nothing written: run the import again (${err.message})`, err.exitCode);
    // The control plane names the item by its place in the whole document: add its name.
    const at = err instanceof CliError ? /^(apis|oauth_servers|basic_auth_credentials)\[(\d+)\]/.exec(err.message) : null;
    const item = at && (doc[at[1] as keyof ConfigDocument] as Record<string, unknown>[])[Number(at[2])];
    if (!item) throw err;
    throw new CliError(
      `the control plane refused the import, nothing written: ${String(item.name ?? item.username)}: ${err instanceof Error ? err.message : ''}`,
      (err as CliError).exitCode,
    );
  }
}

function diffLine(result: WriteResult): string {
  return Object.entries(result.diff)
    .filter(([, d]) => d.added.length + d.changed.length > 0)
    .map(([kind, d]) => `${kind}: ${d.added.length} added, ${d.changed.length} changed`)
    .join('; ');
}

export async function importFromJanus(ctx: CliContext, sources: string[], options: JanusImportOptions): Promise<number> {
  const janus = await readJanus(sources, {
    username: options.username ?? process.env.JANUS_USER,
    password: options.password ?? process.env.JANUS_PASSWORD,
  });
  const items = translateAll(janus);
  const blocking = items.filter((i) => i.status === 'refused' && !i.submitted);
  const code = exitCodeOf(items);
  // json and yaml: one document at the end, for scripts.
  const json = ctx.output !== 'table';
  const out: Record<string, unknown> = { items, exit_code: code };
  if (!json) console.log(reportTable(items));

  const conn = await ctx.connection();
  if (!options.apply) {
    if (!conn.token) {
      if (!json) console.log(`\ndry run: nothing written; not validated by a control plane (run \`gatehouse login\` to validate against ${conn.server})`);
    } else {
      const result = await write(conn, items, true);
      out.dry_run = result;
      if (!json)
        console.log(`\ndry run: nothing written; the control plane at ${conn.server} accepts it (${diffLine(result) || 'no change'}). --apply writes it.`);
    }
  } else {
    if (blocking.length > 0 && !options.skipRefused) {
      if (json) console.log(formatData({ ...out, written: false }, ctx.output === 'yaml' ? 'yaml' : 'json'));
      throw new CliError(
        `nothing written: ${blocking.length} item(s) refused (${blocking.map((i) => `${i.kind} ${i.name}`).join(', ')}); fix them in Janus, or pass --skip-refused to import the rest`,
        EXIT_ACTION_NEEDED,
      );
    }
    const result = await write(conn, items, false);
    out.written = result;
    if (!json)
      console.log(
        `\n${result.changed ? `imported: now version ${result.version} (${diffLine(result)}); \`gatehouse rollback ${result.version - 1}\` undoes it` : `nothing to change (version ${result.version})`}`,
      );
  }
  if (json) console.log(formatData(out, ctx.output === 'yaml' ? 'yaml' : 'json'));
  return code;
}
