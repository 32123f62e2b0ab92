/**
 * `gatehouse login`: POST /login with the password from --password, GATEHOUSE_PASSWORD, the
 * terminal (not echoed) or the first line of stdin; the token goes to the session file (0600).
 * `gatehouse logout` forgets it.
 */
import type { Command } from 'commander';
import { CliError, request } from './admin-http.js';
import { withContext } from './context.js';
import { removeSession, writeSession } from './session.js';

async function readFirstLine(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8').split(/\r?\n/)[0];
}

/** Reads a password from the terminal without echoing it. */
function promptHidden(prompt: string): Promise<string> {
  const stdin = process.stdin;
  process.stderr.write(prompt);
  stdin.setRawMode(true);
  stdin.resume();
  return new Promise((resolve, reject) => {
    let value = '';
    const done = (err?: Error) => {
      stdin.setRawMode(false);
      stdin.pause();
      stdin.off('data', onData);
      process.stderr.write('\n');
      if (err) reject(err);
      else resolve(value);
    };
    const onData = (data: Buffer) => {
      for (const ch of data.toString('utf8')) {
        if (ch === '\r' || ch === '\n') return done();
        if (ch === '\u0003') return done(new CliError('cancelled', 130));
        if (ch === '\u007f' || ch === '\b') value = value.slice(0, -1);
        else value += ch;
      }
    };
    stdin.on('data', onData);
  });
}

/** A secret from its option, else the environment variable (when one is named), the terminal (not echoed) or stdin's first line. */
export async function secretFrom(option: string | undefined, env: string | null, prompt: string): Promise<string> {
  if (option !== undefined) return option;
  if (env !== null && process.env[env]) return process.env[env];
  return process.stdin.isTTY ? promptHidden(prompt) : readFirstLine();
}

export function addLoginCommands(program: Command): void {
  program
    .command('login')
    .description('log in to the admin API and keep the token in $XDG_CONFIG_HOME/gatehouse/ (mode 0600)')
    .option('-u, --username <user>', 'admin user', process.env.GATEHOUSE_USER || 'admin')
    .option('-p, --password <password>', 'password (else GATEHOUSE_PASSWORD, the terminal, or stdin)')
    .action(
      withContext(async (ctx, options: { username: string; password?: string }) => {
        const conn = await ctx.connection();
        const password = await secretFrom(options.password, 'GATEHOUSE_PASSWORD', 'Password: ');
        const { body } = await request(conn, 'POST', '/login', { username: options.username, password }, { auth: false });
        const { access_token: token, expires_in: expiresIn } = body as { access_token: string; expires_in: number };
        const expiresAt = new Date(Date.now() + expiresIn * 1000).toISOString();
        const path = await writeSession({ server: conn.server, token, expires_at: expiresAt });
        if (ctx.output === 'json')
          console.log(JSON.stringify({ server: conn.server, username: options.username, expires_at: expiresAt, session: path }, null, 2));
        else console.log(`logged in to ${conn.server} as ${options.username} (token in ${path}, expires ${expiresAt})`);
      }),
    );

  program
    .command('logout')
    .description('forget the token of the last login')
    .action(async () => {
      await removeSession();
    });
}
