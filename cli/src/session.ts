/**
 * Where the CLI keeps its login: `$XDG_CONFIG_HOME/gatehouse/session.json` (else
 * `~/.config/gatehouse/`), mode 0600 in a 0700 directory, written atomically (temp file + rename).
 * One session: the server it was made for and its admin token.
 */
import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';

export interface Session {
  server: string;
  token: string;
  /** ISO 8601, from the login's expires_in. */
  expires_at: string;
}

export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME || join(homedir(), '.config');
  return join(base, 'gatehouse');
}

export function sessionPath(env: NodeJS.ProcessEnv = process.env): string {
  return join(configDir(env), 'session.json');
}

export async function readSession(env: NodeJS.ProcessEnv = process.env): Promise<Session | null> {
  try {
    const parsed = JSON.parse(await readFile(sessionPath(env), 'utf8')) as Partial<Session>;
    if (typeof parsed.server !== 'string' || typeof parsed.token !== 'string') return null;
    return { server: parsed.server, token: parsed.token, expires_at: String(parsed.expires_at ?? '') };
  } catch {
    return null;
  }
}

export async function writeSession(session: Session, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const dir = configDir(env);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const path = sessionPath(env);
  const tmp = `${path}.${process.pid}.tmp`;
  try {
    await writeFile(tmp, `${JSON.stringify(session, null, 2)}\n`, { mode: 0o600, flag: 'w' });
    // An existing temp file keeps its mode: make sure.
    await chmod(tmp, 0o600);
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  return path;
}

export async function removeSession(env: NodeJS.ProcessEnv = process.env): Promise<void> {
  await rm(sessionPath(env), { force: true });
}
