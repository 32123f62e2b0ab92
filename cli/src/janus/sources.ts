/**
 * Where Janus keeps its configuration, read as Janus reads it:
 *   - a file store (`database.dsn = "file:///dir"`): `dir/apis/*.json` (files whose name contains
 *     ".json", each one definition or an array) and `dir/auth/*.json` (one OAuth server per file);
 *   - `mongoexport` files of the `api_specs`, `oauth_servers` and `basic_auth` collections (a JSON array
 *     or one document per line, Mongo extended JSON accepted, `_id` ignored), told apart by their shape;
 *   - a running Janus's admin API: `POST /login {"username","password"}` → `{"access_token"}`, then
 *     `GET /apis`, `GET /oauth/servers` and `GET /credentials/basic_auth` (absent without that plugin).
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { CliError } from '../admin-http.js';
import type { JanusConfig } from './translate.js';

const TIMEOUT_MS = 60_000;
/** A Janus admin answer larger than this is refused rather than held in memory (50,000 APIs are ~40 MiB). */
const MAX_ANSWER_BYTES = 256 * 1024 * 1024;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Mongo extended JSON (canonical and relaxed) to plain values; `_id` dropped at the top level. */
export function fromExtendedJson(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(fromExtendedJson);
  if (!isObject(value)) return value;
  const keys = Object.keys(value);
  if (keys.length === 1) {
    const [k] = keys;
    const v = value[k];
    if (k === '$oid' || k === '$numberLong' || k === '$numberDecimal' || k === '$symbol') return k === '$oid' || k === '$symbol' ? v : Number(v);
    if (k === '$numberInt' || k === '$numberDouble') return Number(v);
    if (k === '$date') return isObject(v) && '$numberLong' in v ? new Date(Number(v.$numberLong)).toISOString() : v;
  }
  return Object.fromEntries(keys.map((k) => [k, fromExtendedJson(value[k])]));
}

function withoutId(doc: unknown): unknown {
  if (!isObject(doc)) return doc;
  const { _id, ...rest } = doc;
  void _id;
  return rest;
}

function parseJson(text: string, where: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new CliError(`${where} is not JSON: ${(err as Error).message}`);
  }
}

/** A mongoexport file: `--jsonArray` or one document per line. */
export function parseMongoExport(text: string, where: string): unknown[] {
  const trimmed = text.trim();
  if (trimmed === '') return [];
  const docs = trimmed.startsWith('[')
    ? (parseJson(trimmed, where) as unknown[])
    : trimmed
        .split('\n')
        .map((line, i) => [line.trim(), i] as const)
        .filter(([line]) => line !== '')
        .map(([line, i]) => parseJson(line, `${where} line ${i + 1}`));
  return docs.map((d) => withoutId(fromExtendedJson(d)));
}

/** Sorts documents into the collections they come from, by shape. */
export function classify(docs: unknown[], where: string, into: JanusConfig): void {
  for (const doc of docs) {
    if (isObject(doc) && 'proxy' in doc) into.apis.push(doc);
    else if (isObject(doc) && ('oauth_endpoints' in doc || 'token_strategy' in doc)) into.oauthServers.push(doc);
    else if (isObject(doc) && 'username' in doc && 'password' in doc) into.basicAuthUsers.push(doc);
    else
      throw new CliError(`${where}: a document that is neither an API definition, an OAuth server nor a basic_auth user: ${JSON.stringify(doc).slice(0, 120)}`);
  }
}

async function jsonFiles(dir: string, matches: (name: string) => boolean): Promise<string[]> {
  try {
    return (await readdir(dir))
      .filter(matches)
      .sort()
      .map((f) => join(dir, f));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw new CliError(`cannot read ${dir}: ${(err as Error).message}`);
  }
}

async function readFileStore(dir: string, into: JanusConfig): Promise<void> {
  const apiFiles = await jsonFiles(join(dir, 'apis'), (f) => f.includes('.json'));
  const authFiles = await jsonFiles(join(dir, 'auth'), (f) => f.endsWith('.json'));
  if (apiFiles.length + authFiles.length === 0) throw new CliError(`${dir} is not a Janus file store: no apis/*.json nor auth/*.json`);
  for (const file of apiFiles) {
    const doc = parseJson(await readFile(file, 'utf8'), file);
    into.apis.push(...(Array.isArray(doc) ? doc : [doc]).map((d) => withoutId(fromExtendedJson(d))));
  }
  for (const file of authFiles) into.oauthServers.push(withoutId(fromExtendedJson(parseJson(await readFile(file, 'utf8'), file))));
}

export interface JanusAdminCredentials {
  username?: string;
  password?: string;
}

async function janusRequest(url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, { ...init, signal: AbortSignal.timeout(TIMEOUT_MS) });
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause;
    throw new CliError(`cannot reach Janus at ${url}: ${cause?.code ?? (err as Error).message}`);
  }
}

/** The answer's JSON, read up to MAX_ANSWER_BYTES; null when it is not JSON. */
async function jsonOf(res: Response, what: string): Promise<unknown> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of res.body ?? []) {
    size += chunk.byteLength;
    if (size > MAX_ANSWER_BYTES) throw new CliError(`Janus ${what} answered more than ${MAX_ANSWER_BYTES} bytes`);
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    return null;
  }
}

async function readAdminApi(base: string, credentials: JanusAdminCredentials, into: JanusConfig): Promise<void> {
  const root = base.replace(/\/+$/, '');
  if (!credentials.username || !credentials.password)
    throw new CliError('a Janus admin API needs --janus-user and --janus-password (or JANUS_USER / JANUS_PASSWORD)', 2);
  const login = await janusRequest(`${root}/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: credentials.username, password: credentials.password }),
  });
  const loginBody = (await jsonOf(login, 'POST /login')) as { access_token?: unknown } | null;
  if (!login.ok || typeof loginBody?.access_token !== 'string') throw new CliError(`Janus login at ${root}/login failed (HTTP ${login.status})`);
  const headers = { authorization: `Bearer ${loginBody.access_token}`, accept: 'application/json' };
  const list = async (path: string, optional: boolean): Promise<unknown[]> => {
    const res = await janusRequest(`${root}${path}`, { headers });
    if (optional && res.status === 404) return [];
    if (!res.ok) throw new CliError(`Janus GET ${path} answered HTTP ${res.status}`);
    const body = await jsonOf(res, `GET ${path}`);
    if (!Array.isArray(body)) throw new CliError(`Janus GET ${path} did not answer a JSON array`);
    return body.map(withoutId);
  };
  into.apis.push(...(await list('/apis', false)));
  into.oauthServers.push(...(await list('/oauth/servers', true)));
  into.basicAuthUsers.push(...(await list('/credentials/basic_auth', true)));
}

/** Reads every source (URL, file-store directory or mongoexport file) into one Janus configuration. */
export async function readJanus(sources: string[], credentials: JanusAdminCredentials): Promise<JanusConfig> {
  const config: JanusConfig = { apis: [], oauthServers: [], basicAuthUsers: [] };
  for (const source of sources) {
    if (/^https?:\/\//i.test(source)) {
      await readAdminApi(source, credentials, config);
      continue;
    }
    let isDir: boolean;
    try {
      isDir = (await stat(source)).isDirectory();
    } catch (err) {
      throw new CliError(`cannot read ${source}: ${(err as Error).message}`);
    }
    if (isDir) await readFileStore(source, config);
    else classify(parseMongoExport(await readFile(source, 'utf8'), source), source, config);
  }
  return config;
}
