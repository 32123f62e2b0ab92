// The API definitions the benchmarks hold by the thousand (scripts/bench.mjs, scripts/sync-allocations.mjs):
// four listen-path shapes in turn (prefix, parameter, regex parameter with a target template, hosts + methods).
export function rawApi(i, upstreamUrl = 'http://127.0.0.1:9') {
  const targets = [{ target: upstreamUrl }];
  const upstreams = { balancing: 'roundrobin', targets };
  switch (i % 4) {
    case 0:
      return { name: `api-${i}`, proxy: { listen_path: `/svc-${i}/*`, upstreams } };
    case 1:
      return { name: `api-${i}`, proxy: { listen_path: `/svc-${i}/items/{id}/*`, upstreams, strip_path: true } };
    case 2:
      return {
        name: `api-${i}`,
        proxy: { listen_path: `/svc-${i}/v1/{id:[0-9]+}`, upstreams: { ...upstreams, targets: [{ target: `${upstreamUrl}/x/{id}` }] } },
      };
    default:
      return { name: `api-${i}`, hosts: [`h${i}.bench.test`], proxy: { listen_path: `/svc-${i}/*`, methods: ['GET', 'POST'], upstreams } };
  }
}
