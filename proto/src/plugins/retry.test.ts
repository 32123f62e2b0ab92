import { parseApiDefinition } from '../definition/index.js';
import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';
import { cbPlugin } from './cb.js';
import { retryPlugin } from './retry.js';

const withPlugin = (name: string, config: unknown) => ({
  name: 'r',
  proxy: { listen_path: '/r/*', upstreams: { targets: [{ target: 'http://u' }] } },
  plugins: [{ name, config }],
});
const stored = (name: string, config: unknown) => parseApiDefinition(withPlugin(name, config)).plugins[0]!.config;

describe('retry', () => {
  test('defaults: Janus attempts and backoff, its predicate, the idempotent methods', () => {
    expect(stored('retry', {})).toEqual({
      attempts: 3,
      backoff: '1s',
      predicate: 'statusCode == 0 || statusCode >= 500',
      methods: ['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE'],
    });
  });

  test('statuses are stored as the equivalent predicate; methods upper-cased, a comma list accepted', () => {
    expect(stored('retry', { attempts: 2, backoff: '0s', statuses: [502, 503, 502], methods: 'get, post' })).toEqual({
      attempts: 2,
      backoff: '0s',
      predicate: 'statusCode == 0 || statusCode == 502 || statusCode == 503',
      methods: ['GET', 'POST'],
    });
  });

  test('grpc_statuses: names (any case) and numbers, stored as the equivalent predicate beside statuses', () => {
    expect(stored('retry', { backoff: '0s', grpc_statuses: ['UNAVAILABLE', 'resource_exhausted', 14] })).toMatchObject({
      predicate: 'statusCode == 0 || grpcStatus == 14 || grpcStatus == 8',
    });
    expect(stored('retry', { statuses: [503], grpc_statuses: [14] })).toMatchObject({ predicate: 'statusCode == 0 || statusCode == 503 || grpcStatus == 14' });
    const c = retryPlugin.compile(stored('retry', { grpc_statuses: ['Unavailable'] }) as never);
    expect([c.retryOn(200, 'POST', 14), c.retryOn(200, 'POST', 13), c.retryOn(200, 'POST', -1), c.retryOn(0, 'POST', -1)]).toEqual([true, false, false, true]);
  });

  test('compiled: backoff in ms, methods as a set, the predicate as a function', () => {
    const c = retryPlugin.compile(stored('retry', { backoff: '250ms', predicate: 'statusCode == 503' }) as never);
    expect(c).toMatchObject({ attempts: 3, backoffMs: 250, methods: new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']) });
    expect([c.retryOn(503, 'GET'), c.retryOn(500, 'GET'), c.retryOn(0, 'GET')]).toEqual([true, false, false]);
    expect(Object.isFrozen(c)).toBe(true);
  });

  test.each([
    ['attempts 0', { attempts: 0 }, 'plugins[0].config.attempts must be at least 1'],
    ['attempts 11', { attempts: 11 }, 'plugins[0].config.attempts must be at most 10'],
    ['attempts 1.5', { attempts: 1.5 }, 'plugins[0].config.attempts must be an integer'],
    ['a backoff that is not a duration', { backoff: 'soon' }, 'plugins[0].config.backoff must be a duration from "0s" to "10s", e.g. "100ms"'],
    ['a backoff over 10s', { backoff: '11s' }, 'plugins[0].config.backoff must be a duration from "0s" to "10s", e.g. "100ms"'],
    [
      'code as a predicate',
      { predicate: 'process.exit()' },
      'plugins[0].config.predicate is not a valid predicate: expected statusCode, grpcStatus, request.Method, a number or a string, found "process.exit" at position 1',
    ],
    [
      'predicate and grpc_statuses together',
      { predicate: 'statusCode == 500', grpc_statuses: [14] },
      'plugins[0].config.grpc_statuses must not be given together with predicate',
    ],
    [
      'an unknown gRPC status name',
      { grpc_statuses: ['UNAVAILABLE', 'GONE'] },
      'plugins[0].config.grpc_statuses[1] must be a gRPC status: a name such as "UNAVAILABLE" or a number from 0 to 16',
    ],
    [
      'a gRPC status number out of range',
      { grpc_statuses: [17] },
      'plugins[0].config.grpc_statuses[0] must be a gRPC status: a name such as "UNAVAILABLE" or a number from 0 to 16',
    ],
    [
      'a gRPC status of another type',
      { grpc_statuses: [true] },
      'plugins[0].config.grpc_statuses[0] must be a gRPC status: a name such as "UNAVAILABLE" or a number from 0 to 16',
    ],
    ['no gRPC status', { grpc_statuses: [] }, 'plugins[0].config.grpc_statuses must not be empty'],
    [
      'predicate and statuses together',
      { predicate: 'statusCode == 500', statuses: [500] },
      'plugins[0].config.statuses must not be given together with predicate',
    ],
    ['a status out of range', { statuses: [700] }, 'plugins[0].config.statuses[0] must be an HTTP status'],
    ['a bad method', { methods: ['G T'] }, 'plugins[0].config.methods[0] is not a valid HTTP method'],
    ['no method', { methods: [] }, 'plugins[0].config.methods must not be empty'],
  ])('refuses %s', (_row, config, message) => {
    expect(gatehouseErrorOf(() => parseApiDefinition(withPlugin('retry', config))).message).toBe(message);
  });
});

describe('cb', () => {
  test("defaults: hystrix's thresholds and sleep window, no timeout or concurrency limit of its own; Janus's name is dropped", () => {
    expect(stored('cb', { name: 'shared-command' })).toEqual({
      timeout: 0,
      max_concurrent_requests: 0,
      error_percent_threshold: 50,
      request_volume_threshold: 20,
      sleep_window: 5000,
      consecutive_failures: 0,
      predicate: 'statusCode == 0 || statusCode >= 500',
    });
  });

  test('compiled, with a key that changes with the config', () => {
    const a = cbPlugin.compile(stored('cb', { timeout: 1000, consecutive_failures: 5 }) as never);
    expect(a).toMatchObject({
      timeoutMs: 1000,
      maxConcurrent: 0,
      errorPercentThreshold: 50,
      requestVolumeThreshold: 20,
      sleepWindowMs: 5000,
      consecutiveFailures: 5,
    });
    expect(a.failed(502, 'GET')).toBe(true);
    expect(cbPlugin.compile(stored('cb', { timeout: 1000, consecutive_failures: 5 }) as never).key).toBe(a.key);
    expect(cbPlugin.compile(stored('cb', { timeout: 1000, consecutive_failures: 6 }) as never).key).not.toBe(a.key);
  });

  test.each([
    ['error_percent_threshold 0', { error_percent_threshold: 0 }, 'plugins[0].config.error_percent_threshold must be at least 1'],
    ['error_percent_threshold 101', { error_percent_threshold: 101 }, 'plugins[0].config.error_percent_threshold must be at most 100'],
    ['a negative timeout', { timeout: -1 }, 'plugins[0].config.timeout must be at least 0'],
    ['a string sleep_window', { sleep_window: '5s' }, 'plugins[0].config.sleep_window must be an integer'],
    ['request_volume_threshold 0', { request_volume_threshold: 0 }, 'plugins[0].config.request_volume_threshold must be at least 1'],
    [
      'a bad predicate',
      { predicate: 'statusCode >= ' },
      'plugins[0].config.predicate is not a valid predicate: expected statusCode, grpcStatus, request.Method, a number or a string at the end',
    ],
  ])('refuses %s', (_row, config, message) => {
    expect(gatehouseErrorOf(() => parseApiDefinition(withPlugin('cb', config))).message).toBe(message);
  });
});
