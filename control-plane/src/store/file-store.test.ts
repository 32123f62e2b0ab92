import { mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseApiDefinition, type Definitions } from '#proto/definition/index';
import { definitionsHash } from '#proto/snapshot/codec';
import { createLogger } from '#proto/logger';
import { GatehouseError } from '#proto/errors';
import { openFileStore, STORE_FILE } from './file-store.js';
import type { DefinitionStore, StoreState } from './index.js';

const logger = createLogger('control-plane', 'silent');

const api = (name: string, listenPath = `/${name}/*`) =>
  parseApiDefinition({
    name,
    proxy: { listen_path: listenPath, upstreams: { balancing: 'roundrobin', targets: [{ target: 'http://127.0.0.1:9000' }] } },
  });

const withApi = (name: string) => (defs: Definitions): Definitions => ({ ...defs, apis: [...defs.apis, api(name)] });

let dir: string;
let store: DefinitionStore;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'gatehouse-store-'));
  store = await openFileStore({ dataDir: dir, logger });
});

afterEach(async () => {
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

async function onDisk(): Promise<{ revision: number; apis: Array<{ name: string }>; oauth_servers: unknown[] }> {
  return JSON.parse(await readFile(join(dir, STORE_FILE), 'utf8'));
}

describe('file store', () => {
  test('a fresh store is empty at revision 1, already on disk with mode 0600', async () => {
    expect(store.current()).toMatchObject({ revision: 1, defs: { apis: [], oauthServers: [] } });
    expect(await onDisk()).toEqual({ revision: 1, apis: [], oauth_servers: [] });
    expect((await stat(join(dir, STORE_FILE))).mode & 0o777).toBe(0o600);
  });

  test('an update is on disk when it resolves, with the next revision and the content hash', async () => {
    const result = await store.update(withApi('a'));
    expect(result).toMatchObject({ revision: 2, changed: true });
    expect(result.hash).toBe(definitionsHash(result.defs));
    const file = await onDisk();
    expect(file.revision).toBe(2);
    expect(file.apis.map((a) => a.name)).toEqual(['a']);
    // No temp file is left behind.
    expect((await readdir(dir)).sort()).toEqual([STORE_FILE]);
  });

  test('50 concurrent updates run one at a time: each sees the previous, all land, revisions distinct', async () => {
    const names = Array.from({ length: 50 }, (_, i) => `api-${i}`);
    const results = await Promise.all(names.map((name) => store.update(withApi(name))));
    expect(results.map((r) => r.revision)).toEqual(names.map((_, i) => i + 2));
    expect(new Set(results.map((r) => r.revision)).size).toBe(50);
    expect(store.current().defs.apis.map((a) => a.name)).toEqual(names);
    expect((await onDisk()).apis.map((a) => a.name)).toEqual(names);
  });

  test('an async mutation is still serialised with the next one', async () => {
    const slow = store.update(async (defs) => {
      await new Promise((resolve) => setTimeout(resolve, 50));
      return withApi('slow')(defs);
    });
    const fast = store.update((defs) => {
      expect(defs.apis.map((a) => a.name)).toEqual(['slow']);
      return withApi('fast')(defs);
    });
    await Promise.all([slow, fast]);
    expect(store.current().defs.apis.map((a) => a.name)).toEqual(['slow', 'fast']);
  });

  test('a throwing mutation leaves file, revision and state untouched, and the queue keeps going', async () => {
    await store.update(withApi('a'));
    const before = await readFile(join(dir, STORE_FILE), 'utf8');
    const stateBefore = store.current();
    const rejected = store.update(() => {
      throw new GatehouseError('API_NAME_TAKEN', 'api name is already registered');
    });
    const next = store.update(withApi('b'));
    await expect(rejected).rejects.toMatchObject({ code: 'API_NAME_TAKEN' });
    expect((await next).revision).toBe(stateBefore.revision + 1);
    expect(before).toContain('"revision":2');
    expect((await onDisk()).apis.map((a) => a.name)).toEqual(['a', 'b']);
  });

  test('a rejected mutation alone changes nothing on disk', async () => {
    await store.update(withApi('a'));
    const before = await readFile(join(dir, STORE_FILE), 'utf8');
    await expect(store.update(() => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await readFile(join(dir, STORE_FILE), 'utf8')).toBe(before);
    expect(store.current().revision).toBe(2);
  });

  test('a no-op update (same content) keeps the revision and emits no event', async () => {
    await store.update(withApi('a'));
    const events: StoreState[] = [];
    store.subscribe((s) => events.push(s));
    const result = await store.update((defs) => ({ apis: [...defs.apis], oauthServers: [...defs.oauthServers] }));
    expect(result).toMatchObject({ revision: 2, changed: false });
    expect(events).toEqual([]);
    expect((await onDisk()).revision).toBe(2);
  });

  test('subscribers get every committed change; unsubscribe stops them', async () => {
    const events: number[] = [];
    const unsubscribe = store.subscribe((s) => events.push(s.revision));
    await store.update(withApi('a'));
    await store.update(withApi('b'));
    unsubscribe();
    await store.update(withApi('c'));
    expect(events).toEqual([2, 3]);
  });

  test('a throwing subscriber neither fails the update nor keeps the change from the others', async () => {
    const events: number[] = [];
    store.subscribe(() => {
      throw new Error('listener bug');
    });
    store.subscribe((s) => events.push(s.revision));
    await expect(store.update(withApi('a'))).resolves.toMatchObject({ revision: 2, changed: true });
    expect(events).toEqual([2]);
  });

  test('reopening after a restart restores definitions and revision', async () => {
    await store.update(withApi('a'));
    await store.update(withApi('b'));
    const { hash } = store.current();
    await store.close();
    store = await openFileStore({ dataDir: dir, logger });
    expect(store.current().revision).toBe(3);
    expect(store.current().hash).toBe(hash);
    expect(store.current().defs.apis.map((a) => a.name)).toEqual(['a', 'b']);
    expect((await store.update(withApi('c'))).revision).toBe(4);
  });

  test.each([
    ['not JSON', '{'],
    ['revision missing', '{"apis":[],"oauth_servers":[]}'],
    ['apis not an array', '{"revision":1,"apis":{},"oauth_servers":[]}'],
    ['invalid definition', '{"revision":1,"apis":[{"name":"x"}],"oauth_servers":[]}'],
    ['null', 'null'],
    ['an array', '[]'],
  ])('a corrupt store file refuses to load: %s', async (_name, text) => {
    await writeFile(join(dir, STORE_FILE), text);
    await expect(openFileStore({ dataDir: dir, logger })).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE', message: expect.stringContaining(STORE_FILE) });
  });

  test('reopening removes the temp files of a writer killed before its rename, and nothing else', async () => {
    await store.close();
    // Pid 999999999 is above any pid_max: a dead writer's leftovers.
    const abandoned = `.${STORE_FILE}.999999999.0a1b2c.tmp`;
    const live = `.${STORE_FILE}.${process.ppid}.3d4e5f.tmp`;
    for (const file of [abandoned, live, 'notes.tmp']) await writeFile(join(dir, file), 'partial');
    store = await openFileStore({ dataDir: dir, logger });
    expect((await readdir(dir)).sort()).toEqual([live, 'notes.tmp', STORE_FILE].sort());
  });

  test('checkReady passes on a healthy store and fails once the file is gone', async () => {
    await expect(store.checkReady()).resolves.toBeUndefined();
    await rm(join(dir, STORE_FILE));
    await expect(store.checkReady()).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
  });

  test('a failing write is reported as STORE_UNAVAILABLE and leaves the state as it was', async () => {
    await rm(dir, { recursive: true, force: true });
    await expect(store.update(withApi('a'))).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    expect(store.current().revision).toBe(1);
  });

  test('a closed store refuses updates', async () => {
    await store.close();
    await expect(store.update(withApi('a'))).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
  });
});
