/**
 * Admin REST client for e2e tests: logs in, then one typed helper per endpoint, each returning
 * the whole response ({status, headers, body}) so tests assert on status codes, not exceptions.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { httpRequest } from './http-request.js';
import type { DataPlane } from './start-data-plane.js';

export interface AdminResponse<T = any> {
  status: number;
  headers: IncomingHttpHeaders;
  /** Parsed JSON body; the raw text when the body is not JSON; undefined when empty. */
  body: T;
  text: string;
  /** The X-Snapshot-Version header as a number, when present. */
  snapshotVersion: number | undefined;
}

export interface AdminRequestOptions {
  /** Sent as JSON. */
  body?: unknown;
  /** Sent verbatim (malformed JSON, oversized bodies). */
  rawBody?: string | Buffer;
  /** Overrides the logged-in token; null sends no Authorization header at all. */
  token?: string | null;
  /** Full Authorization header value (takes precedence over token). */
  authorization?: string;
  headers?: Record<string, string>;
}

export interface AdminCredentials {
  adminUrl: string;
  username: string;
  password: string;
}

export interface AdminClient {
  readonly baseUrl: string;
  /** Token of the last successful login(). */
  readonly token: string;
  login(username?: string, password?: string): Promise<AdminResponse>;
  request<T = any>(method: string, path: string, options?: AdminRequestOptions): Promise<AdminResponse<T>>;
  listApis(): Promise<AdminResponse<any[]>>;
  getApi(name: string): Promise<AdminResponse>;
  createApi(definition: unknown): Promise<AdminResponse>;
  /** PUT: JSON merge patch into the stored definition. */
  updateApi(name: string, patch: unknown): Promise<AdminResponse>;
  patchApi(name: string, patch: unknown): Promise<AdminResponse>;
  deleteApi(name: string): Promise<AdminResponse>;
  listOAuthServers(): Promise<AdminResponse<any[]>>;
  getOAuthServer(name: string): Promise<AdminResponse>;
  createOAuthServer(definition: unknown): Promise<AdminResponse>;
  updateOAuthServer(name: string, patch: unknown): Promise<AdminResponse>;
  deleteOAuthServer(name: string): Promise<AdminResponse>;
  dataplanes(): Promise<AdminResponse<any[]>>;
  /** CP GET /readyz (no auth). */
  readyz(): Promise<AdminResponse>;
  /**
   * After a write: waits until every DP's /readyz reports a version >= the write's
   * X-Snapshot-Version (or >= `version` when a number is given). Returns that version.
   */
  waitForDataPlanes(write: AdminResponse | number, dataPlanes: readonly DataPlane[], timeoutMs?: number): Promise<number>;
}

export async function createAdminClient(credentials: AdminCredentials): Promise<AdminClient> {
  const baseUrl = credentials.adminUrl;
  let token = '';

  const request = async <T = any>(method: string, path: string, options: AdminRequestOptions = {}): Promise<AdminResponse<T>> => {
    const headers: Record<string, string> = { ...options.headers };
    const bearer = options.token === undefined ? token : options.token;
    if (options.authorization !== undefined) headers.authorization = options.authorization;
    else if (bearer !== null && bearer !== '') headers.authorization = `Bearer ${bearer}`;
    let body: string | Buffer | undefined = options.rawBody;
    if (body === undefined && options.body !== undefined) body = JSON.stringify(options.body);
    if (body !== undefined && headers['content-type'] === undefined) headers['content-type'] = 'application/json';
    const res = await httpRequest(`${baseUrl}${path}`, { method, headers, body });
    const header = res.headers['x-snapshot-version'];
    const version = typeof header === 'string' && /^\d+$/.test(header) ? Number(header) : undefined;
    return {
      status: res.status,
      headers: res.headers,
      body: (res.json ?? (res.text === '' ? undefined : res.text)) as T,
      text: res.text,
      snapshotVersion: version,
    };
  };

  const enc = encodeURIComponent;
  const client: AdminClient = {
    baseUrl,
    get token() {
      return token;
    },
    async login(username = credentials.username, password = credentials.password) {
      const res = await request('POST', '/login', { body: { username, password }, token: null });
      if (res.status === 200 && typeof res.body?.access_token === 'string') token = res.body.access_token;
      return res;
    },
    request,
    listApis: () => request('GET', '/apis'),
    getApi: (name) => request('GET', `/apis/${enc(name)}`),
    createApi: (definition) => request('POST', '/apis', { body: definition }),
    updateApi: (name, patch) => request('PUT', `/apis/${enc(name)}`, { body: patch }),
    patchApi: (name, patch) => request('PATCH', `/apis/${enc(name)}`, { body: patch }),
    deleteApi: (name) => request('DELETE', `/apis/${enc(name)}`),
    listOAuthServers: () => request('GET', '/oauth/servers'),
    getOAuthServer: (name) => request('GET', `/oauth/servers/${enc(name)}`),
    createOAuthServer: (definition) => request('POST', '/oauth/servers', { body: definition }),
    updateOAuthServer: (name, patch) => request('PUT', `/oauth/servers/${enc(name)}`, { body: patch }),
    deleteOAuthServer: (name) => request('DELETE', `/oauth/servers/${enc(name)}`),
    dataplanes: () => request('GET', '/dataplanes'),
    readyz: () => request('GET', '/readyz', { token: null }),
    async waitForDataPlanes(write, dataPlanes, timeoutMs = 10_000) {
      let version: number;
      if (typeof write === 'number') {
        version = write;
      } else {
        if (write.status >= 300) throw new Error(`waitForDataPlanes: the write failed with ${write.status}: ${write.text}`);
        if (write.snapshotVersion === undefined) {
          throw new Error(`waitForDataPlanes: the write's response has no X-Snapshot-Version header (status ${write.status})`);
        }
        version = write.snapshotVersion;
      }
      await Promise.all(dataPlanes.map((dp) => dp.waitForVersion(version, timeoutMs)));
      return version;
    },
  };

  const login = await client.login();
  if (login.status !== 200 || token === '') {
    throw new Error(`admin login as ${credentials.username} failed: ${login.status} ${login.text}`);
  }
  return client;
}
