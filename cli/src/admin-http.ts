/**
 * The CLI's one way to the admin API: JSON over fetch with the session's bearer token. Every
 * failure becomes a CliError carrying what the user should read: the API's own `{"error"}` message
 * and status, or why the server could not be reached.
 */
import { readSession } from './session.js';

export const DEFAULT_SERVER = 'http://127.0.0.1:8081';
const TIMEOUT_MS = 60_000;
const USER_AGENT = 'gatehouse-cli';

export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

export interface Connection {
  server: string;
  token: string | undefined;
}

export interface AdminResponse {
  status: number;
  body: unknown;
  headers: Headers;
}

/** --server, else GATEHOUSE_URL, else the server of the last login, else the default. */
export async function resolveConnection(server: string | undefined, env: NodeJS.ProcessEnv = process.env): Promise<Connection> {
  const session = await readSession(env);
  const url = (server || env.GATEHOUSE_URL || session?.server || DEFAULT_SERVER).replace(/\/+$/, '');
  const token = env.GATEHOUSE_TOKEN || (session?.server === url ? session.token : undefined);
  return { server: url, token };
}

function messageOf(status: number, body: unknown, text: string): string {
  const error = (body as { error?: unknown } | null)?.error;
  const message = typeof error === 'string' ? error : text.trim() || 'no body';
  const hint = status === 401 ? ' (run `gatehouse login`)' : '';
  return `${message} (HTTP ${status})${hint}`;
}

export async function request(
  conn: Connection,
  method: string,
  path: string,
  body?: unknown,
  options: { auth?: boolean; headers?: Record<string, string> } = {},
): Promise<AdminResponse> {
  const headers: Record<string, string> = { ...options.headers, 'user-agent': USER_AGENT, accept: 'application/json' };
  if (options.auth !== false) {
    if (!conn.token) throw new CliError(`not logged in to ${conn.server}: run \`gatehouse login\` (or set GATEHOUSE_TOKEN)`);
    headers.authorization = `Bearer ${conn.token}`;
  }
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(`${conn.server}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new CliError(`cannot reach ${conn.server}: ${cause?.code ?? cause?.message ?? (err as Error).message}`);
  }
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = text;
  }
  if (!res.ok) throw new CliError(messageOf(res.status, parsed, text));
  return { status: res.status, body: parsed, headers: res.headers };
}
