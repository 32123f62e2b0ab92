// The admin API, seen from the console: same origin, bearer token from sessionStorage (gone when the
// tab closes; never in a URL, never in localStorage). A 401 on any call ends the session.

const TOKEN_KEY = 'gatehouse.console.token';
/** The admin API's root: the parent of /console/ (so a path prefix in front of the CP still works). */
const API_ROOT = new URL('../', document.baseURI);

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export const session = {
  token: () => sessionStorage.getItem(TOKEN_KEY),
  start: (token) => sessionStorage.setItem(TOKEN_KEY, token),
  end: () => sessionStorage.removeItem(TOKEN_KEY),
};

/** Listeners called when the API refuses the token (expired, revoked): the console shows the login again. */
const expiredListeners = new Set();
export function onSessionExpired(listener) {
  expiredListeners.add(listener);
}

async function send(method, path, body, token) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (token) headers.Authorization = `Bearer ${token}`;
  const res = await fetch(new URL(path.replace(/^\//, ''), API_ROOT), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'omit',
    cache: 'no-store',
    redirect: 'error',
  });
  const text = await res.text();
  let data;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    data = text;
  }
  if (!res.ok) {
    const message = data && typeof data === 'object' && typeof data.error === 'string' ? data.error : `${res.status} ${res.statusText}`;
    throw new ApiError(res.status, message);
  }
  return { status: res.status, data, snapshotVersion: res.headers.get('X-Snapshot-Version') };
}

export async function login(username, password) {
  const { data } = await send('POST', '/login', { username, password });
  session.start(data.access_token);
}

/** An authenticated call; resolves with { status, data, snapshotVersion }, rejects with ApiError. */
export async function api(method, path, body) {
  try {
    return await send(method, path, body, session.token());
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      session.end();
      for (const listener of expiredListeners) listener(err);
    }
    throw err;
  }
}
