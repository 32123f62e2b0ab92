import { mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseApiDefinition, type Definitions } from '#proto/definition/index';
import { definitionsHash } from '#proto/snapshot/codec';
import { createLogger } from '#proto/logger';
import { GatehouseError } from '#proto/errors';
import { JOURNAL_FILE, openFileStore, readStoredContent, STORE_FILE } from './file-store.js';
import type { DefinitionStore, StoreState } from './index.js';

const logger = createLogger('control-plane', 'silent');

const api = (name: string, listenPath = `/${name}/*`) =>
  parseApiDefinition({
    name,
    proxy: { listen_path: listenPath, upstreams: { balancing: 'roundrobin', targets: [{ target: 'http://127.0.0.1:9000' }] } },
  });

const withApi =
  (name: string) =>
  (defs: Definitions): Definitions => ({ ...defs, apis: [...defs.apis, api(name)] });

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

/** What a load finds: store.json plus the journal. */
async function onDisk(): Promise<{ revision: number; apis: Array<{ name: string }>; oauth_servers: unknown[] }> {
  const { revision, defs } = await readStoredContent(dir, logger);
  return { revision, apis: defs.apis, oauth_servers: defs.oauthServers };
}

/** Both files' bytes. */
const files = async () => `${await readFile(join(dir, STORE_FILE), 'utf8')}\n--\n${await readFile(join(dir, JOURNAL_FILE), 'utf8')}`;

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
    // No temp file is left behind, and store.json is not rewritten: the write is one journal record.
    expect((await readdir(dir)).sort()).toEqual([JOURNAL_FILE, STORE_FILE]);
    expect(JSON.parse(await readFile(join(dir, STORE_FILE), 'utf8')).revision).toBe(1);
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
    const before = await onDisk();
    const stateBefore = store.current();
    const rejected = store.update(() => {
      throw new GatehouseError('API_NAME_TAKEN', 'api name is already registered');
    });
    const next = store.update(withApi('b'));
    await expect(rejected).rejects.toMatchObject({ code: 'API_NAME_TAKEN' });
    expect((await next).revision).toBe(stateBefore.revision + 1);
    expect(before.revision).toBe(2);
    expect((await onDisk()).apis.map((a) => a.name)).toEqual(['a', 'b']);
  });

  test('a rejected mutation alone changes nothing on disk', async () => {
    await store.update(withApi('a'));
    const before = await files();
    await expect(store.update(() => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await files()).toBe(before);
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
    expect((await readdir(dir)).sort()).toEqual([live, 'notes.tmp', JOURNAL_FILE, STORE_FILE].sort());
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

describe('file store journal', () => {
  const journalPath = () => join(dir, JOURNAL_FILE);
  /** Stores left open as a crashed process leaves them, closed after the test. */
  const crashed: DefinitionStore[] = [];
  afterEach(async () => {
    for (const s of crashed.splice(0)) await s.close();
  });
  /** A second store on the same files while the first was never closed: what a start after SIGKILL finds. */
  const reopen = async () => {
    crashed.push(store);
    store = await openFileStore({ dataDir: dir, logger });
    return store;
  };
  const names = (s: DefinitionStore) => s.current().defs.apis.map((a) => a.name);

  test('a write appends one record of what it changed; store.json is untouched until compaction', async () => {
    await store.update(withApi('a'));
    const base = await readFile(join(dir, STORE_FILE), 'utf8');
    await store.update(withApi('b'));
    await store.update((defs) => ({ ...defs, apis: defs.apis.filter((x) => x.name !== 'a') }));
    expect(await readFile(join(dir, STORE_FILE), 'utf8')).toBe(base);
    const records = (await readFile(journalPath(), 'utf8'))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(records.map((r) => [r.revision, r.hash, r.changes.map((c: { name: string; def?: unknown }) => [c.name, c.def !== undefined])])).toEqual([
      [2, expect.any(String), [['a', true]]],
      [3, expect.any(String), [['b', true]]],
      [4, store.current().hash, [['a', false]]],
    ]);
  });

  test('after a crash (no close) a start replays the journal: content, order, revision and hash; then compacts', async () => {
    await store.update(withApi('a'));
    await store.update(withApi('b'));
    await store.update(withApi('c'));
    // Changed in place, one removed, and a reorder (which a record carries as the whole order).
    await store.update((defs) => ({ ...defs, apis: [api('c', '/c2/*'), ...defs.apis.filter((x) => x.name === 'a')] }));
    const before = store.current();
    await reopen();
    expect(store.current()).toMatchObject({ revision: before.revision, hash: before.hash });
    expect(names(store)).toEqual(['c', 'a']);
    expect(store.current().defs.apis[0].proxy.listen_path).toBe('/c2/*');
    // Compacted at start: the base holds everything, the journal is empty.
    expect(JSON.parse(await readFile(join(dir, STORE_FILE), 'utf8')).revision).toBe(before.revision);
    expect((await stat(journalPath())).size).toBe(0);
    expect((await store.update(withApi('d'))).revision).toBe(before.revision + 1);
  });

  test('a torn last record (append cut short) is dropped; the writes before it load', async () => {
    await store.update(withApi('a'));
    const { revision, hash } = store.current();
    const torn = `{"revision":${revision + 1},"hash":"abc","changes":[{"kind":"api","name":"b","def":{"na`;
    await writeFile(journalPath(), torn, { flag: 'a' });
    await reopen();
    expect(store.current()).toMatchObject({ revision, hash });
    expect(names(store)).toEqual(['a']);
    expect((await store.update(withApi('b'))).revision).toBe(revision + 1);
    await reopen();
    expect(names(store)).toEqual(['a', 'b']);
  });

  test.each([
    ['a damaged record before the last', (lines: string[]) => [lines[0].slice(0, 20), ...lines.slice(1)], 'record 1'],
    ['a gap in the revisions', (lines: string[]) => [lines[0], lines[2]], 'record 2 is revision 4, expected 3'],
    ['an invalid definition', (lines: string[]) => [lines[0].replace('"listen_path":"/a/*"', '"listen_path":7'), lines[1], lines[2]], 'record 1 (revision 2)'],
    [
      'a record under another name',
      (lines: string[]) => [lines[0].replace('"name":"a"', '"name":"z"'), lines[1], lines[2]],
      'api "z" holds a definition named "a"',
    ],
    [
      "content that does not hash to the record's hash",
      (lines: string[]) => [lines[0], lines[1], lines[2].replace(/"hash":"[0-9a-f]+"/, '"hash":"0"')],
      'the journal does not continue store.json',
    ],
  ])('%s: STORE_UNAVAILABLE naming the journal, files left as they were', async (_what, spoil, message) => {
    for (const name of ['a', 'b', 'c']) await store.update(withApi(name));
    const lines = (await readFile(journalPath(), 'utf8')).trim().split('\n');
    const damaged = `${spoil(lines).join('\n')}\n`;
    await writeFile(journalPath(), damaged);
    await expect(openFileStore({ dataDir: dir, logger })).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE', message: expect.stringContaining(message) });
    await expect(openFileStore({ dataDir: dir, logger })).rejects.toMatchObject({ message: expect.stringContaining(JOURNAL_FILE) });
    expect(await readFile(journalPath(), 'utf8')).toBe(damaged);
  });

  test('compaction crash points: base written but journal not yet emptied, and killed before the base rename', async () => {
    for (const name of ['a', 'b', 'c']) await store.update(withApi(name));
    const journal = await readFile(journalPath());
    const oldBase = await readFile(join(dir, STORE_FILE));
    const { revision, hash } = store.current();
    // Step 1 done (the new base renamed in), step 2 not: the records are all in the base and skipped.
    await reopen();
    await writeFile(journalPath(), journal);
    await reopen();
    expect(store.current()).toMatchObject({ revision, hash });
    expect((await store.update(withApi('d'))).revision).toBe(revision + 1);
    await reopen();
    expect(names(store)).toEqual(['a', 'b', 'c', 'd']);
    // Killed while writing the new base's temp file: the old base, the whole journal and a temp file.
    await writeFile(join(dir, STORE_FILE), oldBase);
    await writeFile(journalPath(), journal);
    await writeFile(join(dir, `.${STORE_FILE}.999999999.abcdef.tmp`), '{"revision":4,"apis":[');
    await reopen();
    expect(store.current()).toMatchObject({ revision, hash });
    expect((await readdir(dir)).sort()).toEqual([JOURNAL_FILE, STORE_FILE]);
  });

  test('store.json replaced by hand with the journal of another content left beside it: refused, not merged', async () => {
    for (const name of ['a', 'b']) await store.update(withApi(name));
    await writeFile(join(dir, STORE_FILE), '{"revision":1,"apis":[],"oauth_servers":[]}\n');
    const journal = await readFile(journalPath(), 'utf8');
    await writeFile(journalPath(), journal.replace(/"name":"a"/g, '"name":"q"').replace('"/a/*"', '"/q/*"'));
    await expect(openFileStore({ dataDir: dir, logger })).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
      message: expect.stringContaining('does not continue store.json'),
    });
  });

  test('the journal is compacted once it outgrows the base (64 KiB at least), and every write survives it', async () => {
    const big = (name: string) =>
      parseApiDefinition({ ...JSON.parse(JSON.stringify(api(name))), hosts: Array.from({ length: 40 }, (_, i) => `h${i}-${name}.example`) });
    let compacted = 0;
    for (let i = 0; i < 60; i++) {
      await store.update((defs) => ({ ...defs, apis: [...defs.apis, big(`n${i}`)] }));
      if (JSON.parse(await readFile(join(dir, STORE_FILE), 'utf8')).revision > 1) compacted++;
    }
    expect(compacted).toBeGreaterThan(0);
    const { size } = await stat(journalPath());
    const baseSize = (await stat(join(dir, STORE_FILE))).size;
    expect(size).toBeLessThanOrEqual(Math.max(baseSize, 64 * 1024) + 4096);
    const { revision, hash } = store.current();
    await store.close();
    store = await openFileStore({ dataDir: dir, logger });
    expect(store.current()).toMatchObject({ revision, hash });
    expect(store.current().defs.apis).toHaveLength(60);
  });
});
