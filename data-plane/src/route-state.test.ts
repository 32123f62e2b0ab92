import { RouteStateRegistry } from './route-state.js';

/** A registry whose added and dropped values are recorded, and its committed uses as `route target value` lines. */
function recorded() {
  const added: string[] = [];
  const dropped: string[] = [];
  const registry = new RouteStateRegistry<{ name: string }>({ added: (v) => added.push(v.name), dropped: (v) => dropped.push(v.name) });
  const uses = () => [...registry.uses()].map(([value, route, target]) => `${route} ${target} ${value.name}`).sort();
  const make = (name: string) => () => ({ name });
  return { registry, added, dropped, uses, make };
}

test('nothing is added or used before the commit, and a generation never committed changes nothing', () => {
  const { registry, added, uses, make } = recorded();
  const first = registry.begin();
  first.get('k1', 'api:a', 't1', make('v1'));
  expect(added).toEqual([]);
  expect(uses()).toEqual([]);
  first.commit();
  expect(added).toEqual(['v1']);

  const rejected = registry.begin();
  rejected.releaseAll();
  rejected.get('k2', 'api:b', 't2', make('v2'));
  expect(uses()).toEqual(['api:a t1 v1']);
  expect(added).toEqual(['v1']);
});

test('a value is shared by every route that gets its key, and made once', () => {
  const { registry, added, uses, make } = recorded();
  const generation = registry.begin();
  const a = generation.get('k', 'api:a', 't1', make('v'));
  const b = generation.get('k', 'api:b', 't2', make('other'));
  expect(b).toBe(a);
  generation.commit();
  expect(added).toEqual(['v']);
  expect(uses()).toEqual(['api:a t1 v', 'api:b t2 v']);
});

test('a later generation gets the committed value of a key, not a new one', () => {
  const { registry, make } = recorded();
  const first = registry.begin();
  const v = first.get('k', 'api:a', 't', make('v'));
  first.commit();
  const second = registry.begin();
  expect(second.get('k', 'api:b', 't', make('new'))).toBe(v);
});

test('releaseAll (a full snapshot): only what this generation got is kept', () => {
  const { registry, dropped, uses, make } = recorded();
  const first = registry.begin();
  first.get('k1', 'api:a', 't', make('v1'));
  first.get('k2', 'api:b', 't', make('v2'));
  first.commit();
  const second = registry.begin();
  second.releaseAll();
  second.get('k1', 'api:a', 't', make('unused'));
  second.commit();
  expect(dropped).toEqual(['v2']);
  expect(uses()).toEqual(['api:a t v1']);
});

test('a delta: untouched routes keep theirs; a released route gives up its values, dropped when no route uses them', () => {
  const { registry, dropped, uses, make } = recorded();
  const first = registry.begin();
  first.releaseAll();
  first.get('shared', 'api:a', 't', make('s'));
  first.get('shared', 'api:b', 't', make('s'));
  first.get('own', 'api:b', 't2', make('o'));
  first.get('untouched', 'api:c', 't', make('u'));
  first.commit();

  const delta = registry.begin();
  delta.release('api:b');
  delta.commit();
  expect(dropped).toEqual(['o']);
  expect(uses()).toEqual(['api:a t s', 'api:c t u']);
});

test('a route that gets again holds exactly what it got: what it held before and did not get again is given up', () => {
  const { registry, dropped, added, uses, make } = recorded();
  const first = registry.begin();
  first.get('old', 'api:a', 't1', make('old'));
  first.get('kept', 'api:a', 't2', make('kept'));
  first.commit();

  const changed = registry.begin();
  changed.get('kept', 'api:a', 't2', make('unused'));
  changed.get('new', 'api:a', 't3', make('new'));
  changed.commit();
  expect(dropped).toEqual(['old']);
  expect(added).toEqual(['old', 'kept', 'new']);
  expect(uses()).toEqual(['api:a t2 kept', 'api:a t3 new']);
});

test('released and got again in one generation (a changed definition keeping its key): kept, not dropped and added again', () => {
  const { registry, dropped, added, make } = recorded();
  const first = registry.begin();
  const v = first.get('k', 'api:a', 't', make('v'));
  first.commit();
  const delta = registry.begin();
  delta.release('api:a');
  expect(delta.get('k', 'api:a', 't', make('new'))).toBe(v);
  delta.commit();
  expect(dropped).toEqual([]);
  expect(added).toEqual(['v']);
});

test('clear drops every value', () => {
  const { registry, dropped, uses, make } = recorded();
  const first = registry.begin();
  first.get('k1', 'api:a', 't', make('v1'));
  first.get('k2', 'api:b', 't', make('v2'));
  first.commit();
  registry.clear();
  expect(dropped.sort()).toEqual(['v1', 'v2']);
  expect(uses()).toEqual([]);
});
