import fc from 'fast-check';
import { parseApiDefinition, parseOAuthServer, type Definitions } from '#proto/definition/index';
import { deriveDefinitions } from '#proto/snapshot/codec';
import { collectGarbage } from '../../../test/helpers/collect-garbage.js';
import { changesBetween, createReplay, encodeRecord, parseJournal } from './journal.js';

const api = (name: string, version: number) =>
  parseApiDefinition({ name, proxy: { listen_path: `/${name}/v${version}/*`, upstreams: { targets: [{ target: 'http://127.0.0.1:9000' }] } } });
const server = (name: string) =>
  parseOAuthServer({
    name,
    oauth_endpoints: { token: { listen_path: `/${name}/token`, upstreams: { targets: [{ target: 'http://127.0.0.1:9000' }] } } },
    token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: 'k' }] },
  });

type Edit =
  | { op: 'replace'; at: number; version: number }
  | { op: 'append'; name: string }
  | { op: 'remove'; at: number }
  | { op: 'same-json'; at: number }
  | { op: 'shuffle'; seed: number };

/** One write as the admin API makes them: in place, appended, filtered out, or a whole new order. */
const edit: fc.Arbitrary<Edit> = fc.oneof(
  fc.record({ op: fc.constant('replace' as const), at: fc.nat(), version: fc.nat(5) }),
  fc.record({ op: fc.constant('append' as const), name: fc.stringMatching(/^[a-h]$/) }),
  fc.record({ op: fc.constant('remove' as const), at: fc.nat() }),
  fc.record({ op: fc.constant('same-json' as const), at: fc.nat() }),
  fc.record({ op: fc.constant('shuffle' as const), seed: fc.nat() }),
);

function applyEdit(defs: Definitions, e: Edit): Definitions {
  const apis = defs.apis;
  const at = 'at' in e && apis.length > 0 ? e.at % apis.length : -1;
  switch (e.op) {
    case 'replace':
      return at < 0 ? defs : { ...defs, apis: apis.map((a, i) => (i === at ? api(a.name, e.version) : a)) };
    case 'same-json':
      return at < 0 ? defs : { ...defs, apis: apis.map((a, i) => (i === at ? parseApiDefinition(JSON.parse(JSON.stringify(a))) : a)) };
    case 'append':
      return apis.some((a) => a.name === e.name) ? defs : { ...defs, apis: [...apis, api(e.name, 0)] };
    case 'remove':
      return { ...defs, apis: apis.filter((_, i) => i !== at) };
    default:
      return {
        ...defs,
        apis: [...apis].sort((a, b) => ((a.name.charCodeAt(0) * (e.seed + 7)) % 11) - ((b.name.charCodeAt(0) * (e.seed + 7)) % 11)),
        oauthServers: e.seed % 2 ? [server('s')] : [],
      };
  }
}

const json = (defs: Definitions) => JSON.stringify([defs.apis, defs.oauthServers, defs.basicAuthCredentials ?? []]);

/** What the admin API tells the codec a write did (deriveDefinitions): the journal then takes the changes from it. */
function deriveAsAdmin(defs: Definitions, next: Definitions, e: Edit): void {
  if (next === defs || e.op === 'shuffle' || (e.op !== 'append' && defs.apis.length === 0)) return; // PUT /config is compared whole
  const at = e.op === 'append' ? -1 : e.at % defs.apis.length;
  const edit =
    e.op === 'append' ? { after: next.apis.at(-1) } : e.op === 'remove' ? { before: defs.apis[at] } : { before: defs.apis[at], after: next.apis[at] };
  deriveDefinitions(defs, next, [{ kind: 'api', ...edit }]);
}

test('replaying the encoded changes of any sequence of writes gives each written configuration, order included', () => {
  fc.assert(
    fc.property(fc.array(fc.tuple(edit, fc.boolean()), { maxLength: 25 }), (edits) => {
      let defs: Definitions = { apis: [api('a', 0), api('b', 0), api('c', 0)], oauthServers: [] };
      const replay = createReplay(defs);
      for (const [e, asAdmin] of edits) {
        const next = applyEdit(defs, e);
        if (asAdmin) deriveAsAdmin(defs, next, e);
        const { records } = parseJournal(Buffer.from(encodeRecord({ revision: 1 }, changesBetween(defs, next))));
        replay.apply(records[0]);
        expect(json(replay.defs())).toBe(json(next));
        defs = next;
      }
    }),
    { numRuns: 300 },
  );
});

test('only what changed is recorded: an in-place replacement is one change, the same JSON none, no order unless reordered', () => {
  const before: Definitions = { apis: ['a', 'b', 'c', 'd'].map((n) => api(n, 0)), oauthServers: [] };
  const replaced = applyEdit(before, { op: 'replace', at: 2, version: 1 });
  expect(changesBetween(before, replaced)).toEqual({ changes: [{ kind: 'api', name: 'c', def: replaced.apis[2] }] });
  expect(changesBetween(before, applyEdit(before, { op: 'same-json', at: 1 }))).toEqual({ changes: [] });
  expect(changesBetween(before, applyEdit(before, { op: 'remove', at: 1 }))).toEqual({ changes: [{ kind: 'api', name: 'b' }] });
  const reordered = { ...before, apis: [...before.apis].reverse() };
  expect(changesBetween(before, reordered)).toEqual({ changes: [], order: { api: ['d', 'c', 'b', 'a'] } });
});

test('the memo of the last diff keeps no earlier configuration alive: a chain of writes frees all but the newest', async () => {
  let defs: Definitions = { apis: ['a', 'b'].map((n) => api(n, 0)), oauthServers: [] };
  const versions = [new WeakRef(defs)];
  for (let version = 1; version <= 5; version++) {
    const next = applyEdit(defs, { op: 'replace', at: version, version });
    const changes = changesBetween(defs, next);
    // The store and the history diff the same pair: the second gets the first's result.
    expect(changesBetween(defs, next)).toBe(changes);
    versions.push(new WeakRef(next));
    defs = next;
  }
  await collectGarbage();
  expect(versions.map((v) => v.deref() !== undefined)).toEqual([false, false, false, false, false, true]);
});

test('parseJournal: a torn or damaged last line is left out, a damaged line before it throws', () => {
  const line = '{"revision":2,"changes":[]}\n';
  expect(parseJournal(Buffer.from(`${line}${line}{"revis`))).toMatchObject({
    records: [{ revision: 2 }, { revision: 2 }],
    validBytes: line.length * 2,
    tornBytes: 7,
  });
  expect(parseJournal(Buffer.from(`${line}\0\0\0\n`))).toMatchObject({ validBytes: line.length, tornBytes: 4 });
  expect(() => parseJournal(Buffer.from(`{"revis\n${line}`))).toThrow('record 1 (at byte 0) is not a JSON object');
});
