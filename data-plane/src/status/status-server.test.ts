import { pino } from 'pino';
import { Registry } from 'prom-client';
import { parseApiDefinition } from '#proto/definition/index';
import { toSnapshotMessage } from '#proto/snapshot/codec';
import { httpRequest } from '../../../test/helpers/http-request.js';
import { createMemoryTokenStore } from '../auth/index.js';
import { createSnapshotHolder } from '../sync/snapshot-holder.js';
import { createTableBuilder } from '../table/index.js';
import { createStatusServer, type StatusServer } from './status-server.js';

let status: StatusServer;
let url: string;
let holder: ReturnType<typeof createSnapshotHolder>;

beforeEach(async () => {
  const registry = new Registry();
  holder = createSnapshotHolder({ tables: createTableBuilder({ tokenStore: createMemoryTokenStore(), registry }), registry });
  status = createStatusServer({ holder, registry, logger: pino({ enabled: false }) });
  url = `http://127.0.0.1:${await status.listen(0, '127.0.0.1')}`;
});
afterEach(() => status.close());

function applySnapshot(version: number) {
  const api = parseApiDefinition({
    name: 'a',
    proxy: { listen_path: '/a/*', upstreams: { balancing: 'roundrobin', targets: [{ target: 'http://127.0.0.1:9' }] } },
  });
  const message = toSnapshotMessage(version, { apis: [api], oauthServers: [] });
  holder.apply(message);
  return message.hash;
}

describe('status listener', () => {
  test('/healthz is 200 {"status":"ok"} even before a snapshot', async () => {
    const res = await httpRequest(`${url}/healthz`);
    expect([res.status, res.json, res.headers['content-type']]).toEqual([200, { status: 'ok' }, 'application/json']);
  });

  test('/readyz is 503 {"ready":false} with the reason until a snapshot is applied, then 200 with version and hash', async () => {
    const before = await httpRequest(`${url}/readyz`);
    expect([before.status, before.json]).toEqual([503, { ready: false, reason: 'no snapshot yet' }]);
    const hash = applySnapshot(12);
    const after = await httpRequest(`${url}/readyz`);
    expect([after.status, after.json]).toEqual([200, { ready: true, version: 12, hash }]);
  });

  test('/readyz turns 503 once draining', async () => {
    applySnapshot(1);
    status.markDraining();
    const res = await httpRequest(`${url}/readyz`);
    expect([res.status, res.json]).toEqual([503, { ready: false, reason: 'shutting down' }]);
  });

  test('/metrics is Prometheus text', async () => {
    applySnapshot(3);
    const res = await httpRequest(`${url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    expect(res.text).toContain('gatehouse_snapshot_version 3');
  });

  test.each([
    ['an unknown path', 'GET', '/apis', 404],
    ['a proxy-looking path', 'GET', '/a/x', 404],
    ['a write method', 'POST', '/healthz', 405],
  ])('%s is refused with a JSON error', async (_name, method, path, statusCode) => {
    const res = await httpRequest(`${url}${path}`, { method });
    expect(res.status).toBe(statusCode);
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.json).toEqual({ error: expect.any(String) });
  });
});
