import { aclPlugin } from './acl.js';
import { parseBasicAuthCredential, parseKeyAuthCredential } from '../definition/index.js';
import { legacyHashApiKey } from '../api-key.js';
import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';
import { parsePluginConfig } from './index.js';

const parse = (config: unknown) => parsePluginConfig('acl', config, ['plugins', 0, 'config']);
const refusal = (config: unknown) => gatehouseErrorOf(() => parse(config)).message;

test('allow or deny: stored lower-cased, deduplicated and sorted, the other list empty; hide_groups_header defaults to false', () => {
  expect(parse({ allow: ['Partners', 'admins', 'ADMINS'] })).toEqual({ allow: ['admins', 'partners'], deny: [], hide_groups_header: false });
  expect(parse({ deny: ['banned'], hide_groups_header: true })).toEqual({ allow: [], deny: ['banned'], hide_groups_header: true });
  expect(parse({ allow: ['a'], deny: [] })).toEqual({ allow: ['a'], deny: [], hide_groups_header: false });
});

test.each([
  ['neither list', {}, 'plugins[0].config must list groups in exactly one of "allow" and "deny"'],
  ['an empty allow', { allow: [] }, 'plugins[0].config must list groups in exactly one of "allow" and "deny"'],
  ['both lists', { allow: ['a'], deny: ['b'] }, 'plugins[0].config must list groups in exactly one of "allow" and "deny"'],
  ['a group with a space', { allow: ['a b'] }, 'plugins[0].config.allow[0] must be 1-64 characters of a-z 0-9 . _ - (any case)'],
  ['an empty group', { deny: [''] }, 'plugins[0].config.deny[0] must be 1-64 characters'],
  ['a group of 65 characters', { allow: ['g'.repeat(65)] }, 'plugins[0].config.allow[0] must be 1-64 characters'],
  ['a group that is not a string', { allow: [7] }, 'plugins[0].config.allow[0] must be a string'],
  ['more than 256 groups', { allow: Array.from({ length: 257 }, (_, i) => `g${i}`) }, 'plugins[0].config.allow must have at most 256 groups'],
  ['a hide_groups_header that is not a boolean', { allow: ['a'], hide_groups_header: 'yes' }, 'plugins[0].config.hide_groups_header must be a boolean'],
])('%s is refused, naming the field', (_row, config, message) => {
  expect(refusal(config)).toContain(message);
});

test('compile: the listed groups as a set, and whether they allow or deny', () => {
  const compiled = aclPlugin.compile(parse({ deny: ['b', 'a'], hide_groups_header: true }));
  expect(compiled).toEqual({ groups: new Set(['a', 'b']), allow: false, hideGroupsHeader: true });
  expect(Object.isFrozen(compiled)).toBe(true);
});

describe('credential groups', () => {
  const key = { username: 'ann', key_hash: legacyHashApiKey('ann-key-0123456789') };
  const hash = `scrypt$16384$8$1$${Buffer.alloc(16, 1).toString('base64url')}$${Buffer.alloc(32, 1).toString('base64url')}`;

  test('stored only when given (a credential without keeps its form), lower-cased, deduplicated and sorted', () => {
    expect(parseKeyAuthCredential(key)).toEqual(key);
    expect(Object.keys(parseKeyAuthCredential(key))).toEqual(['username', 'key_hash']);
    expect(parseKeyAuthCredential({ ...key, groups: ['Ops', 'admins', 'ops'] })).toEqual({ ...key, groups: ['admins', 'ops'] });
    expect(parseBasicAuthCredential({ username: 'bob', password_hash: hash, groups: ['partners'] })).toEqual({
      username: 'bob',
      password_hash: hash,
      groups: ['partners'],
    });
  });

  test.each([
    ['an empty list', [], 'groups must not be empty'],
    ['a group with a slash', ['a/b'], 'groups[0] must be 1-64 characters of a-z 0-9 . _ - (any case)'],
    ['33 groups', Array.from({ length: 33 }, (_, i) => `g${i}`), 'groups must have at most 32 groups'],
    ['a string instead of a list', 'admins', 'groups must be an array'],
  ])('%s is refused, naming the field', (_row, groups, message) => {
    expect(gatehouseErrorOf(() => parseKeyAuthCredential({ ...key, groups })).message).toContain(message);
    expect(gatehouseErrorOf(() => parseBasicAuthCredential({ username: 'bob', password_hash: hash, groups })).message).toContain(message);
  });
});
