/**
 * `gatehouse basic-auth|key-auth …`: the global credentials of the basic_auth and key_auth plugins
 * (/credentials/basic_auth, /credentials/key_auth), and their consumer groups (the acl plugin's). Secrets go
 * in by option, terminal (not echoed) or stdin, never by an environment variable the admin's own login reads;
 * an API key is printed once, when made.
 */
import { randomBytes } from 'node:crypto';
import type { Command } from 'commander';
import { request } from './admin-http.js';
import { withContext } from './context.js';
import { secretFrom } from './login-command.js';
import { print } from './output.js';
import { addDeleteCommand } from './resource-commands.js';

type Credential = { username: string; key?: string; groups?: string[] };

const GROUPS_OPTION = ['-g, --groups <groups>', "the user's consumer groups, comma-separated (the acl plugin's)"] as const;
/** `--groups a,b` as the body member; none when the option is not given. */
const groupsMember = (groups: string | undefined) => (groups === undefined ? {} : { groups: groups.split(',').map((g) => g.trim()) });

const itemPath = (collection: string, username: string) => `${collection}/${encodeURIComponent(username)}`;

/** list, set-groups and delete, which both kinds share. */
function addCommonCommands(group: Command, collection: string, singular: string): void {
  group
    .command('list')
    .description('list the users and their groups (never a secret)')
    .action(
      withContext(async (ctx) => {
        const { body } = await request(await ctx.connection(), 'GET', collection);
        print(ctx.output, body as Credential[], [
          ['USERNAME', (c) => c.username],
          ['GROUPS', (c) => c.groups],
        ]);
      }),
    );
  group
    .command('set-groups')
    .argument('<username>')
    .argument('[groups]', 'comma-separated; none removes them')
    .description("replace a user's consumer groups (the acl plugin's); the secret is kept")
    .action(
      withContext(async (ctx, username: string, groups: string | undefined) => {
        await request(await ctx.connection(), 'PATCH', itemPath(collection, username), { groups: groups === undefined ? null : groupsMember(groups).groups });
        printWritten(ctx.output, singular, username, 'configured');
      }),
    );
  addDeleteCommand(group, 'users', collection, singular, 'username');
}

/** Prints a write's outcome, with the API key when one was made (its only showing). */
function printWritten(output: string, singular: string, username: string, result: string, key?: string): void {
  if (output === 'json') console.log(JSON.stringify({ kind: singular, username, result, ...(key !== undefined && { key }) }, null, 2));
  else console.log(key === undefined ? `${singular}/${username} ${result}` : `${singular}/${username} ${result}; its key, shown only now: ${key}`);
}

export function addCredentialCommands(program: Command): void {
  const basic = program.command('basic-auth').description('users of the basic_auth plugin');
  const users = '/credentials/basic_auth';
  addCommonCommands(basic, users, 'basic-auth');
  // create and set-password differ in method, path, prompt and result only.
  for (const [command, description, prompt, result] of [
    ['create', 'create a user', 'Password for', 'created'],
    ['set-password', "change a user's password", 'New password for', 'configured'],
  ] as const) {
    basic
      .command(command)
      .argument('<username>')
      .option('-p, --password <password>', "the password (else the terminal, or stdin's first line)")
      .option(...GROUPS_OPTION)
      .description(description)
      .action(
        withContext(async (ctx, username: string, options: { password?: string; groups?: string }) => {
          const password = await secretFrom(options.password, null, `${prompt} ${username}: `);
          const conn = await ctx.connection();
          const groups = groupsMember(options.groups);
          if (command === 'create') await request(conn, 'POST', users, { username, password, ...groups });
          else await request(conn, 'PUT', itemPath(users, username), { password, ...groups });
          printWritten(ctx.output, 'basic-auth', username, result);
        }),
      );
  }

  const keyAuth = program.command('key-auth').description('API keys of the key_auth plugin');
  const keys = '/credentials/key_auth';
  addCommonCommands(keyAuth, keys, 'key-auth');
  keyAuth
    .command('create')
    .argument('<username>')
    .option('-k, --key <key>', 'a key of your own (16-256 printable characters); else the server makes one')
    .option(...GROUPS_OPTION)
    .description('give a user an API key (printed once when the server makes it)')
    .action(
      withContext(async (ctx, username: string, options: { key?: string; groups?: string }) => {
        const body = { username, ...(options.key !== undefined && { key: options.key }), ...groupsMember(options.groups) };
        const { body: created } = await request(await ctx.connection(), 'POST', keys, body);
        printWritten(ctx.output, 'key-auth', username, 'created', (created as Credential).key);
      }),
    );
  keyAuth
    .command('rotate')
    .argument('<username>')
    .option('-k, --key <key>', 'the new key (16-256 printable characters); else a random one, printed once')
    .description("replace a user's API key: the old one is refused from the next snapshot on")
    .action(
      withContext(async (ctx, username: string, options: { key?: string }) => {
        // As the server makes one: 32 random bytes, base64url.
        const key = options.key ?? randomBytes(32).toString('base64url');
        await request(await ctx.connection(), 'PUT', itemPath(keys, username), { key });
        printWritten(ctx.output, 'key-auth', username, 'configured', options.key === undefined ? key : undefined);
      }),
    );
}
