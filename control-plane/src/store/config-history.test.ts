import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseApiDefinition, type Definitions } from '#proto/definition/index';
import { definitionsHash } from '#proto/snapshot/codec';
import { createLogger } from '#proto/logger';
import { HISTORY_BASE, HISTORY_DIR, HISTORY_JOURNAL, openFileHistory, type ConfigHistory } from './config-history.js';
import { serialize } from './file-store.js';

const logger = createLogger('control-plane', 'silent');

const api = (name: string, hosts: string[] = []) =>
  parseApiDefinition({ name, hosts, proxy: { listen_path: `/${name}/*`, upstreams: { targets: [{ target: 'http://127.0.0.1:9000' }] } } });

const state = (revision: number, defs: Definitions) => ({ revision, defs, hash: definitionsHash(defs) });
const origin = { author: 'admin', action: 'PUT /apis/x' };
const names = (defs: Definitions | undefined) => defs?.apis.map((a) => a.name);

let dir: string;
const open: ConfigHistory[] = [];
const openHistory = async (limit = 3) => {
  const history = await openFileHistory({ dataDir: dir, logger, limit });
  open.push(history);
  return history;
};
const historyFiles = async () => (await readdir(join(dir, HISTORY_DIR))).sort();

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'gatehouse-history-'));
});

afterEach(async () => {
  for (const h of open.splice(0)) await h.close();
  await rm(dir, { recursive: true, force: true });
});

/** Versions 2..n+1, each adding one API to the previous (the first `first` APIs at once). */
async function writeVersions(history: ConfigHistory, count: number, first: Definitions = { apis: [], oauthServers: [] }): Promise<Definitions[]> {
  const contents: Definitions[] = [];
  let defs = first;
  for (let v = 2; v < 2 + count; v++) {
    defs = { ...defs, apis: [...defs.apis, api(`v${v}`)] };
    await history.record(state(v, defs), origin);
    contents.push(defs);
  }
  return contents;
}

describe('file config history', () => {
  test('each version is one journal line of its changes; definitions are rebuilt per version, also after a restart', async () => {
    const history = await openHistory();
    await writeVersions(history, 3);
    expect(await historyFiles()).toEqual([HISTORY_JOURNAL]);
    const lines = (await readFile(join(dir, HISTORY_DIR, HISTORY_JOURNAL), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => [l.seq, l.version, l.changes.map((c: { name: string }) => c.name)])).toEqual([
      [1, 2, ['v2']],
      [2, 3, ['v3']],
      [3, 4, ['v4']],
    ]);
    expect(names(await history.definitions(3))).toEqual(['v2', 'v3']);
    const list = history.list();
    await history.close();
    const again = await openHistory();
    expect(again.list()).toEqual(list);
    expect(names(await again.definitions(2))).toEqual(['v2']);
    expect(names(await again.definitions(4))).toEqual(['v2', 'v3', 'v4']);
  });

  test('the limit drops the oldest; compaction moves the base to the oldest kept version, which rebuilds the same after a restart', async () => {
    const history = await openHistory(3);
    // A first version of ~100 KiB: the journal outgrows the 64 KiB floor and is compacted.
    const wide = {
      apis: Array.from({ length: 150 }, (_, i) =>
        api(
          `w${i}`,
          Array.from({ length: 8 }, (_, j) => `h${j}.w${i}.example`),
        ),
      ),
      oauthServers: [],
    };
    const contents = await writeVersions(history, 6, wide);
    expect(history.list().map((e) => e.version)).toEqual([7, 6, 5]);
    expect(await history.definitions(4)).toBeUndefined();
    for (const v of [5, 6, 7]) expect(definitionsHash((await history.definitions(v))!)).toBe(definitionsHash(contents[v - 2]));
    const list = history.list();
    // Closing waits for the compaction.
    await history.close();
    expect(await historyFiles()).toEqual([HISTORY_BASE, HISTORY_JOURNAL]);
    const base = await readFile(join(dir, HISTORY_DIR, HISTORY_BASE), 'utf8');
    expect(base.startsWith('{"seq":')).toBe(true);
    const again = await openHistory(3);
    expect(again.list()).toEqual(list);
    for (const v of [5, 6, 7]) expect(names(await again.definitions(v))).toEqual(names(contents[v - 2]));
    // Rolled back to 5 and on from there, across another restart.
    await again.record(state(8, contents[3]), { author: 'admin', action: 'rollback to 5' });
    await again.close();
    const third = await openHistory(3);
    expect(third.list().map((e) => [e.version, e.action])).toEqual([
      [8, 'rollback to 5'],
      [7, 'PUT /apis/x'],
      [6, 'PUT /apis/x'],
    ]);
    expect(names(await third.definitions(8))).toEqual(names(contents[3]));
  });

  test('a compaction never drops a kept version: after every write, each listed version rebuilds from the files alone', async () => {
    const wide = {
      apis: Array.from({ length: 150 }, (_, i) =>
        api(
          `w${i}`,
          Array.from({ length: 8 }, (_, j) => `h${j}.w${i}.example`),
        ),
      ),
      oauthServers: [],
    };
    const contents = new Map<number, Definitions>();
    let history = await openHistory(3);
    let defs: Definitions = wide;
    for (let v = 2; v <= 8; v++) {
      if (v > 2) defs = { ...defs, apis: [...defs.apis, api(`v${v}`)] };
      contents.set(v, defs);
      await history.record(state(v, defs), origin);
      // Reopened, the history holds no content in memory: every version comes from base.json and the journal.
      await history.close();
      history = await openHistory(3);
      const listed = history.list().map((e) => e.version);
      expect(listed).toEqual([v, v - 1, v - 2].filter((x) => x >= 2));
      for (const version of listed) {
        expect({ version, hash: definitionsHash((await history.definitions(version)) ?? { apis: [], oauthServers: [] }) }).toEqual({
          version,
          hash: definitionsHash(contents.get(version)!),
        });
      }
    }
    // The ~100 KiB first version did drop out, and the base moved past it.
    expect(JSON.parse(await readFile(join(dir, HISTORY_DIR, HISTORY_BASE), 'utf8')).revision).toBeGreaterThan(2);
  });

  test('a crash between writing the new base and replacing the journal: the old journal on the new base loads the same', async () => {
    const history = await openHistory(2);
    const wide = {
      apis: Array.from({ length: 150 }, (_, i) =>
        api(
          `w${i}`,
          Array.from({ length: 8 }, (_, j) => `h${j}.w${i}.example`),
        ),
      ),
      oauthServers: [],
    };
    const contents = new Map<number, Definitions>([
      [2, wide],
      [3, { ...wide, apis: [...wide.apis, api('a')] }],
      [4, { ...wide, apis: [...wide.apis, api('a'), api('b')] }],
    ]);
    for (const v of [2, 3]) await history.record(state(v, contents.get(v)!), origin);
    const journalBefore = await readFile(join(dir, HISTORY_DIR, HISTORY_JOURNAL), 'utf8');
    // Version 2 (~100 KiB of changes) drops out of the kept 2: the base moves to version 3 and the journal starts there.
    await history.record(state(4, contents.get(4)!), origin);
    const list = history.list();
    await history.close();
    expect(JSON.parse(await readFile(join(dir, HISTORY_DIR, HISTORY_BASE), 'utf8')).revision).toBe(3);
    const lastLine = (await readFile(join(dir, HISTORY_DIR, HISTORY_JOURNAL), 'utf8')).trim().split('\n').at(-1);
    // The journal as the compaction found it (lines of versions 2 and 3), plus version 4's line.
    await writeFile(join(dir, HISTORY_DIR, HISTORY_JOURNAL), `${journalBefore}${lastLine}\n`);
    const again = await openHistory(2);
    expect(again.list()).toEqual(list);
    for (const v of [3, 4]) expect(definitionsHash((await again.definitions(v))!)).toBe(definitionsHash(contents.get(v)!));
  });

  test('a write that drops a large entry does not wait for the compaction it starts; lines appended meanwhile are carried into the new journal', async () => {
    const history = await openHistory(2);
    const wide = {
      apis: Array.from({ length: 150 }, (_, i) =>
        api(
          `w${i}`,
          Array.from({ length: 8 }, (_, j) => `h${j}.w${i}.example`),
        ),
      ),
      oauthServers: [],
    };
    const contents = await writeVersions(history, 2, wide);
    const basePath = join(dir, HISTORY_DIR, HISTORY_BASE);
    // Version 2 (~100 KiB) drops out: a compaction starts, and this write has returned before its base is written.
    await history.record(state(4, { ...contents[1], apis: [...contents[1].apis, api('a')] }), origin);
    expect(await readFile(basePath).catch((err: NodeJS.ErrnoException) => err.code)).toBe('ENOENT');
    // More writes while it runs, each readable at once.
    contents.push({ ...contents[1], apis: [...contents[1].apis, api('a')] });
    for (const v of [5, 6]) {
      contents.push({ ...contents.at(-1)!, apis: [...contents.at(-1)!.apis, api(`m${v}`)] });
      await history.record(state(v, contents.at(-1)!), origin);
      expect(definitionsHash((await history.definitions(v))!)).toBe(definitionsHash(contents.at(-1)!));
    }
    const list = history.list();
    expect(list.map((e) => e.version)).toEqual([6, 5]);
    await history.close();
    // The base moved past version 2's line and the journal holds every line from the base's on, in order.
    const baseSeq = JSON.parse(await readFile(basePath, 'utf8')).seq;
    expect(baseSeq).toBeGreaterThan(1);
    const seqs = (await readFile(join(dir, HISTORY_DIR, HISTORY_JOURNAL), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).seq);
    expect(seqs).toEqual(Array.from({ length: 6 - baseSeq }, (_, i) => baseSeq + i));
    const again = await openHistory(2);
    expect(again.list()).toEqual(list);
    for (const v of [5, 6]) expect(definitionsHash((await again.definitions(v))!)).toBe(definitionsHash(contents[v - 2]));
  });

  test('a torn last line is dropped; a damaged journal starts a new history instead of stopping the CP', async () => {
    const history = await openHistory();
    await writeVersions(history, 2);
    await history.close();
    await writeFile(join(dir, HISTORY_DIR, HISTORY_JOURNAL), '{"seq":3,"version":4,"cha', { flag: 'a' });
    const again = await openHistory();
    expect(again.list().map((e) => e.version)).toEqual([3, 2]);
    await again.record(state(4, { apis: [api('x')], oauthServers: [] }), origin);
    expect(names(await again.definitions(4))).toEqual(['x']);
    await again.close();
    await writeFile(join(dir, HISTORY_DIR, HISTORY_JOURNAL), 'garbage\n{"seq":2}\n');
    const fresh = await openHistory();
    expect(fresh.list()).toEqual([]);
    await fresh.seed(state(9, { apis: [api('y')], oauthServers: [] }));
    expect(names(await fresh.definitions(9))).toEqual(['y']);
  });

  test('a history file the file system cannot read is an error, never "no history"; nothing is dropped', async () => {
    // A directory in a file's place: reading it fails as EACCES would for a process not running as root.
    const journal = join(dir, HISTORY_DIR, HISTORY_JOURNAL);
    const history = await openHistory();
    await writeVersions(history, 2);
    await history.close();
    const lines = await readFile(journal, 'utf8');

    const reopened = await openHistory();
    await rm(journal);
    await mkdir(journal);
    await expect(reopened.definitions(2)).rejects.toMatchObject({ code: 'EISDIR' });
    await expect(openFileHistory({ dataDir: dir, logger, limit: 3 })).rejects.toMatchObject({ code: 'EISDIR' });
    await rm(journal, { recursive: true });
    await writeFile(journal, lines);

    await mkdir(join(dir, HISTORY_DIR, 'index.json'));
    await expect(openFileHistory({ dataDir: dir, logger, limit: 3 })).rejects.toMatchObject({ code: 'EISDIR' });
    expect(await readFile(journal, 'utf8')).toBe(lines);
  });

  test("a previous release's history (a complete copy per version + index.json) is converted at the first start", async () => {
    await mkdir(join(dir, HISTORY_DIR), { recursive: true });
    const v2 = { apis: [api('a')], oauthServers: [] };
    const v3 = { apis: [api('a'), api('b')], oauthServers: [] };
    const entry = (version: number, defs: Definitions) => ({
      version,
      time: '2024-01-01T00:00:00.000Z',
      author: 'old',
      action: 'POST /apis',
      hash: definitionsHash(defs),
      apis: defs.apis.length,
      oauth_servers: 0,
      basic_auth_credentials: 0,
    });
    await writeFile(join(dir, HISTORY_DIR, '2.json'), serialize(2, v2));
    await writeFile(join(dir, HISTORY_DIR, '3.json'), serialize(3, v3));
    await writeFile(join(dir, HISTORY_DIR, 'index.json'), JSON.stringify([entry(2, v2), entry(3, v3)]));
    const history = await openHistory();
    expect(history.list()).toEqual([entry(3, v3), entry(2, v2)]);
    expect(names(await history.definitions(2))).toEqual(['a']);
    expect(names(await history.definitions(3))).toEqual(['a', 'b']);
    expect(await historyFiles()).toEqual([HISTORY_JOURNAL]);
  });
});
