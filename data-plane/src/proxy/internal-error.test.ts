/**
 * A bug inside the routing table reaches the client as a 500 INTERNAL and the log as an error with its stack,
 * never as a 404 that would hide it. The real proxy listener on loopback serves a real snapshot whose one route's
 * listen_path matcher throws.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { compileApi } from '#proto/compile/index';
import { parseApiDefinition } from '#proto/definition/index';
import { buildRoutingTable } from '#proto/routing/index';
import { toSnapshotMessage } from '#proto/snapshot/codec';
import { httpRequest } from '../../../test/helpers/http-request.js';
import { createMemoryTokenStore } from '../auth/index.js';
import { createSnapshotHolder } from '../sync/snapshot-holder.js';
import { createTableBuilder, type TableSource } from '../table/index.js';
import { createProxyServer } from './proxy-server.js';
import { createUpstreamPools } from './upstream-pools.js';

test('a route matcher that throws is a logged 500 INTERNAL, not a 404', async () => {
  const definition = parseApiDefinition({ name: 'broken', proxy: { listen_path: '/b/{id}', upstreams: { targets: [{ target: 'http://127.0.0.1:9' }] } } });
  const holder = createSnapshotHolder({ tables: createTableBuilder({ tokenStore: createMemoryTokenStore() }) });
  expect(holder.apply(toSnapshotMessage(1, { apis: [definition], oauthServers: [] }))).toMatchObject({ ok: true });
  const route = compileApi(definition);
  const listenPath = Object.assign(Object.create(Object.getPrototypeOf(route.listenPath)), route.listenPath, {
    match: () => {
      throw new TypeError('listen path matcher bug');
    },
  });
  const routing = buildRoutingTable([{ ...route, listenPath }]);
  const faulty: TableSource = { current: () => ({ ...holder.current()!, routing }) };

  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString('utf8')));
      done();
    },
  });
  const pools = createUpstreamPools();
  const proxy = createProxyServer({ holder: faulty, pools, logger: pino({ level: 'info' }, sink) });
  const port = await proxy.listen(0, '127.0.0.1');
  try {
    const res = await httpRequest(`http://127.0.0.1:${port}/b/1`);
    expect(res.status).toBe(500);
    expect(res.json).toBe('internal server error');
    const logged = lines.find((l) => l.msg === 'unexpected proxy failure');
    expect(logged).toMatchObject({ level: 50, path: '/b/1', err: { type: 'TypeError', message: 'listen path matcher bug' } });
    expect((logged!.err as { stack: string }).stack).toContain('listen path matcher bug\n    at ');
  } finally {
    await proxy.close(1_000);
    await pools.close();
  }
});
