import { parseApiDefinition, type Definitions } from '#proto/definition/index';
import { knownConfigIndex } from '#proto/compile/incremental';
import { apiKind, createDefinition, indexForWrites } from './definition-writes.js';

const api = (name: string) => parseApiDefinition({ name, proxy: { listen_path: `/${name}/*`, upstreams: { targets: [{ target: 'http://127.0.0.1:9' }] } } });

test('indexForWrites (called at start) leaves the configuration indexed, and a write derives the next index from it', () => {
  const defs: Definitions = { apis: [api('a'), api('b')], oauthServers: [] };
  expect(knownConfigIndex(defs)).toBeUndefined();
  indexForWrites(defs);
  expect(knownConfigIndex(defs)).toBeTruthy();
  const { defs: next } = createDefinition(apiKind, defs, {
    name: 'c',
    proxy: { listen_path: '/c/*', upstreams: { targets: [{ target: 'http://127.0.0.1:9' }] } },
  });
  expect(knownConfigIndex(next)).toBeTruthy();
});
