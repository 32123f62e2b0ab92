import type { GatewayObject, HTTPRouteObject } from './translate.js';
import { judgeRoutes, oldestFirst } from './verdicts.js';

const gateway: GatewayObject = {
  metadata: { name: 'gw', namespace: 'ns' },
  spec: { gatewayClassName: 'gatehouse', listeners: [{ name: 'http', protocol: 'HTTP', port: 80 }] },
};
const world = { grants: [], labelsOf: () => ({}), serviceExists: () => true };
const route = (name: string, path: string): HTTPRouteObject => ({
  metadata: { name, namespace: 'ns', creationTimestamp: `2026-01-01T00:00:0${name.length}Z` },
  spec: { parentRefs: [{ name: 'gw' }], rules: [{ matches: [{ path: { type: 'PathPrefix', value: path } }], backendRefs: [{ name: 'svc', port: 8080 }] }] },
});

test('a route judged again with the same translation keeps its definition object; a changed route gets a new one', () => {
  const a = route('a', '/a');
  const first = judgeRoutes(oldestFirst([a, route('bb', '/b')], []), [gateway], world);
  expect(first.candidates).toHaveLength(2);
  // The informer's objects are new after a relist: the same content is what keeps the definition.
  const again = judgeRoutes(oldestFirst([structuredClone(a), route('bb', '/b2')], []), [gateway], world, first.parsed);
  expect(again.candidates[0].api).toBe(first.candidates[0].api);
  expect(again.candidates[1].api).not.toBe(first.candidates[1].api);
  expect(again.candidates[1].api.proxy.listen_path).toBe('/b2/*');
  // Only what this judgement used is handed on.
  expect([...again.parsed.values()]).toEqual(again.candidates.map((c) => c.api));
});
