import type { GatehouseError } from '#proto/errors';
import { aclPlugin } from '#proto/plugins/acl';
import { parsePluginConfig } from '#proto/plugins/index';
import { aclRuntime } from './acl.js';
import type { PluginExchange } from './pipeline.js';
import type { StageDeps } from './runtime.js';

/** The verdict of an acl with `config` on a request whose consumer (null: none) has `groups`, and the X-Consumer-Groups it sends. */
function verdict(config: unknown, consumer: string | null, groups: string[] = []) {
  const stage = aclRuntime.stage(aclPlugin.compile(parsePluginConfig('acl', config, [])), {} as StageDeps);
  const ex = { consumer, consumerGroups: groups, groupsHeader: null } as unknown as PluginExchange;
  try {
    stage.request!(ex);
  } catch (err) {
    return (err as GatehouseError).code;
  }
  return { groupsHeader: ex.groupsHeader };
}

test.each<[string, unknown, string[], unknown]>([
  ['allow: one group listed', { allow: ['admins'] }, ['admins', 'ops'], { groupsHeader: 'admins, ops' }],
  ['allow: no group listed', { allow: ['admins'] }, ['ops'], 'ACL_FORBIDDEN'],
  ['allow: a consumer without groups', { allow: ['admins'] }, [], 'ACL_FORBIDDEN'],
  ['deny: a group listed', { deny: ['banned'] }, ['banned', 'ops'], 'ACL_FORBIDDEN'],
  ['deny: no group listed', { deny: ['banned'] }, ['ops'], { groupsHeader: 'ops' }],
  ['deny: a consumer without groups passes, and no X-Consumer-Groups is sent', { deny: ['banned'] }, [], { groupsHeader: null }],
  ['hide_groups_header', { allow: ['admins'], hide_groups_header: true }, ['admins'], { groupsHeader: null }],
])('%s', (_row, config, groups, expected) => {
  expect(verdict(config, 'ann', groups)).toEqual(expected);
});

test('no authenticated consumer is refused, allow or deny (fail closed)', () => {
  expect(verdict({ deny: ['banned'] }, null)).toBe('ACL_FORBIDDEN');
  expect(verdict({ allow: ['admins'] }, null)).toBe('ACL_FORBIDDEN');
});
