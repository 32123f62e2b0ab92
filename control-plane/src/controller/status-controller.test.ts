import { GatehouseError } from '#proto/errors';
import { API_DEFINITION } from '../store/kubernetes/crds.js';
import type { ResourceVerdict } from '../store/kubernetes/kubernetes-store.js';
import { pino } from 'pino';
import { createStatusController, desiredStatus as desiredFor, fleetOf, statusUpdate, type DataPlaneView } from './status-controller.js';

const AT = '2026-11-22T20:00:00Z';

const desiredStatus = (v: ResourceVerdict, dps: readonly DataPlaneView[], at: string) => desiredFor(v, fleetOf(dps), at);

function verdict(o: Partial<ResourceVerdict> = {}): ResourceVerdict {
  return { resource: API_DEFINITION, metadataName: 'a', uid: 'u', generation: 3, name: 'a', error: null, sinceRevision: 5, status: undefined, ...o };
}

const dp = (id: string, acked: number | null, nack?: { version: number; error: string }): DataPlaneView => ({
  id,
  last_ack: acked === null ? null : { version: acked },
  last_nack: nack ?? null,
});

/** The status a CR holds after `generation` was Programmed. */
function programmedAt(generation: number): Record<string, unknown> {
  return {
    conditions: [
      {
        type: 'Programmed',
        status: 'True',
        reason: 'Programmed',
        message: 'served by every synced data plane',
        observedGeneration: generation,
        lastTransitionTime: AT,
      },
    ],
  };
}

function condition(status: Record<string, unknown>, type: string) {
  return (status.conditions as Array<Record<string, unknown>>).find((c) => c.type === type);
}

describe('desiredStatus', () => {
  test.each<[string, Partial<ResourceVerdict>, DataPlaneView[], [string, string], [string, string], string]>([
    ['all data planes ACKed this generation', {}, [dp('a', 5), dp('b', 6)], ['True', 'Accepted'], ['True', 'Programmed'], 'served by every synced data plane'],
    [
      'one has not ACKed it yet',
      {},
      [dp('a', 5), dp('b', 4)],
      ['True', 'Accepted'],
      ['False', 'Pending'],
      'not every synced data plane serves generation 3 yet',
    ],
    ['one still on its first sync is not asked', {}, [dp('a', 5), dp('b', null)], ['True', 'Accepted'], ['True', 'Programmed'], 'served by every synced'],
    [
      'a NACK of a snapshot with it',
      {},
      [dp('a', 4, { version: 5, error: 'boom' }), dp('b', 5)],
      ['True', 'Accepted'],
      ['False', 'Rejected'],
      'a data plane rejected it: boom',
    ],
    [
      'a NACK of its first snapshot',
      {},
      [dp('a', null, { version: 6, error: 'boom' })],
      ['True', 'Accepted'],
      ['False', 'Rejected'],
      'a data plane rejected it: boom',
    ],
    [
      'a NACK older than the ACK does not count',
      {},
      [dp('a', 6, { version: 5, error: 'old' })],
      ['True', 'Accepted'],
      ['True', 'Programmed'],
      'served by every synced',
    ],
    // The data plane keeps serving its last good snapshot, which holds this generation.
    [
      'a NACK of a later snapshot by a data plane that serves it',
      {},
      [dp('a', 6, { version: 7, error: 'later' }), dp('b', 7)],
      ['True', 'Accepted'],
      ['True', 'Programmed'],
      'served by every synced',
    ],
    [
      'a NACK of a later snapshot, its generation newer than what that data plane serves',
      { sinceRevision: 7 },
      [dp('a', 6, { version: 8, error: 'boom' }), dp('b', 8)],
      ['True', 'Accepted'],
      ['False', 'Rejected'],
      'a data plane rejected it: boom',
    ],
    ['no data plane, never programmed', {}, [], ['True', 'Accepted'], ['False', 'NoDataPlanes'], 'no data plane has synced yet'],
    ['none synced yet, never programmed', {}, [dp('a', null)], ['True', 'Accepted'], ['False', 'NoDataPlanes'], 'no data plane has synced yet'],
    [
      'no data plane, this generation programmed before',
      { status: programmedAt(3) },
      [],
      ['True', 'Accepted'],
      ['True', 'Programmed'],
      'served by every synced',
    ],
    [
      'no data plane, an older generation programmed before',
      { status: programmedAt(2) },
      [],
      ['True', 'Accepted'],
      ['False', 'NoDataPlanes'],
      'no data plane has synced yet',
    ],
    [
      'invalid definition',
      { error: new GatehouseError('VALIDATION_FAILED', 'proxy.listen_path must start with "/"', { field: 'proxy.listen_path' }), sinceRevision: null },
      [dp('a', 9)],
      ['False', 'Invalid'],
      ['False', 'Invalid'],
      'not accepted',
    ],
    [
      'route conflict',
      { error: new GatehouseError('API_LISTEN_PATH_TAKEN', 'api listen path is already registered'), sinceRevision: null },
      [],
      ['False', 'Conflicted'],
      ['False', 'Invalid'],
      'not accepted',
    ],
    [
      'name taken',
      { error: new GatehouseError('API_NAME_TAKEN', 'api name is already registered'), sinceRevision: null },
      [],
      ['False', 'NameTaken'],
      ['False', 'Invalid'],
      'not accepted',
    ],
  ])('%s', (_name, v, dps, accepted, programmed, programmedMessage) => {
    const status = desiredStatus(verdict(v), dps, AT);
    expect(condition(status, 'Accepted')).toMatchObject({ status: accepted[0], reason: accepted[1], observedGeneration: 3 });
    expect(condition(status, 'Programmed')).toMatchObject({ status: programmed[0], reason: programmed[1], observedGeneration: 3 });
    expect(condition(status, 'Programmed')!.message).toContain(programmedMessage);
  });

  test('the Accepted message of a rejected definition names the field', () => {
    const error = new GatehouseError('VALIDATION_FAILED', 'proxy.upstreams.targets[0].target is not a valid URL', {
      field: 'proxy.upstreams.targets[0].target',
    });
    expect(condition(desiredStatus(verdict({ error }), [], AT), 'Accepted')!.message).toBe('proxy.upstreams.targets[0].target is not a valid URL');
  });
});

describe('statusUpdate', () => {
  const desired = desiredStatus(verdict(), [dp('a', 5)], AT);

  test('nothing to write when only lastTransitionTime would change (no write loop)', () => {
    const later = desiredStatus(verdict(), [dp('a', 5)], '2026-11-22T21:00:00Z');
    expect(statusUpdate(desired, later)).toBeNull();
  });

  test('a changed condition is written with a new lastTransitionTime; an unchanged one keeps its own', () => {
    const next = desiredStatus(verdict(), [dp('a', 5), dp('b', 1)], '2026-11-22T21:00:00Z');
    const update = statusUpdate(desired, next)!;
    expect(condition(update, 'Accepted')!.lastTransitionTime).toBe(AT);
    expect(condition(update, 'Programmed')).toMatchObject({ status: 'False', lastTransitionTime: '2026-11-22T21:00:00Z' });
  });

  test('a status read back from the apiserver, its keys sorted, is the status written: nothing to write', () => {
    const sortedKeys = (value: unknown): unknown =>
      Array.isArray(value)
        ? value.map(sortedKeys)
        : value && typeof value === 'object'
          ? Object.fromEntries(
              Object.entries(value)
                .sort(([a], [b]) => (a < b ? -1 : 1))
                .map(([k, v]) => [k, sortedKeys(v)]),
            )
          : value;
    const readBack = sortedKeys(desired) as Record<string, unknown>;
    expect(JSON.stringify(readBack)).not.toBe(JSON.stringify(desired));
    expect(statusUpdate(readBack, desiredStatus(verdict(), [dp('a', 5)], '2026-11-22T21:00:00Z'))).toBeNull();
  });

  test('a CR without status gets one', () => {
    expect(statusUpdate(undefined, desired)).toEqual(desired);
  });

  test("the fleet's size is not in a status: another data plane syncing or leaving changes nothing to write", () => {
    expect(statusUpdate(desired, desiredStatus(verdict(), [dp('a', 5), dp('b', 7), dp('c', null)], AT))).toBeNull();
    expect(statusUpdate(desired, desiredStatus(verdict({ status: desired }), [], AT))).toBeNull();
  });

  test('a status an earlier release wrote loses its dataPlanes counts with the next write', () => {
    const update = statusUpdate({ ...desired, dataPlanes: { acked: 1, nacked: 0, connected: 1 } }, desired);
    expect(update).toEqual(desired);
    expect(update).not.toHaveProperty('dataPlanes');
  });
});

describe('createStatusController', () => {
  /**
   * The store's side of the controller in memory: a status write lands in the verdict and is
   * reported back as a change, as the informer's update event does; `reads` counts the verdicts
   * a round looked up.
   */
  function setup(crs: number, dataPlanes: DataPlaneView[], fleetKnown: () => boolean = () => true, onWrite: (writes: number) => void = () => {}) {
    const verdicts = new Map<string, ResourceVerdict>();
    for (let i = 0; i < crs; i++) verdicts.set(`u${i}`, verdict({ uid: `u${i}`, metadataName: `cr-${i}`, name: `cr-${i}`, sinceRevision: 5 }));
    const byName = new Map([...verdicts.values()].map((v) => [v.metadataName, v]));
    let reads = 0;
    const writes: string[] = [];
    const lookups = {
      get: (uid: string) => {
        reads++;
        return verdicts.get(uid);
      },
      keys: () => verdicts.keys(),
    } as unknown as ReadonlyMap<string, ResourceVerdict>;
    const controller = createStatusController({
      store: {
        verdicts: () => lookups,
        async patchStatus(_resource, metadataName, status) {
          const v = byName.get(metadataName)!;
          v.status = status;
          writes.push(metadataName);
          controller.resourcesChanged(new Set([v.uid]));
          onWrite(writes.length);
        },
      },
      dataPlanes: async () => (fleetKnown() ? dataPlanes : null),
      isLeader: () => true,
      logger: pino({ enabled: false }),
      delayMs: 1,
    });
    const programmed = () => [...verdicts.values()].filter((v) => (v.status ? condition(v.status, 'Programmed')!.status === 'True' : false)).length;
    return {
      verdicts,
      controller,
      programmed,
      /** Runs rounds until none is left; returns the verdict reads and status writes they made. */
      async round(change?: () => void) {
        reads = 0;
        writes.length = 0;
        change?.();
        controller.trigger();
        await controller.settled();
        return { reads, writes: [...writes] };
      },
    };
  }

  test('a round after one CR changed looks at that CR and the unsettled ones, not at every CR', async () => {
    const dps = [dp('a', 5)];
    const s = setup(200, dps);
    const first = await s.round();
    expect(first.writes).toHaveLength(200);
    expect(s.programmed()).toBe(200);
    const one = s.verdicts.get('u7')!;
    const next = await s.round(() => {
      one.generation = 4;
      one.sinceRevision = 6;
      s.controller.resourcesChanged(new Set(['u7']));
    });
    expect(next.writes).toEqual(['cr-7']);
    expect(condition(one.status!, 'Programmed')).toMatchObject({ reason: 'Pending', observedGeneration: 4 });
    expect(next.reads).toBeLessThan(10);
    // The ACK of revision 6 settles it, again without a look at the other 199.
    const acked = await s.round(() => (dps[0] = dp('a', 6)));
    expect(acked.writes).toEqual(['cr-7']);
    expect(acked.reads).toBeLessThan(10);
    expect(s.programmed()).toBe(200);
    await s.controller.close();
  });

  test("while the fleet cannot be known (another replica's reports unreadable) nothing is written; once it can, every CR is", async () => {
    let known = false;
    // Its own data plane has ACKed everything: a round that took it for the whole fleet would call all 30 Programmed.
    const s = setup(30, [dp('a', 5)], () => known);
    const blind = await s.round();
    expect(blind.writes).toEqual([]);
    expect(s.programmed()).toBe(0);
    known = true;
    const seeing = await s.round();
    expect(seeing.writes).toHaveLength(30);
    expect(s.programmed()).toBe(30);
    await s.controller.close();
  });

  test('a data plane that serves less than the others makes every CR it lacks Pending again', async () => {
    const dps = [dp('a', 7)];
    const s = setup(50, dps);
    s.verdicts.get('u3')!.sinceRevision = 7;
    await s.round();
    expect(s.programmed()).toBe(50);
    // b ACKed revision 6 only: u3 (carried since 7) is not served by every synced data plane.
    const lower = await s.round(() => dps.push(dp('b', 6)));
    expect(lower.writes).toEqual(['cr-3']);
    expect(condition(s.verdicts.get('u3')!.status!, 'Programmed')).toMatchObject({ reason: 'Pending' });
    await s.controller.close();
  });

  test('the first data plane to sync after none had looks at every CR', async () => {
    const dps = [dp('a', 9)];
    const s = setup(20, dps);
    s.verdicts.get('u0')!.sinceRevision = 9;
    await s.round();
    expect(s.programmed()).toBe(20);
    // a leaves: what was programmed stays so.
    expect((await s.round(() => dps.pop())).writes).toEqual([]);
    // b serves revision 8 only: u0, Programmed and settled meanwhile, is Pending again.
    const synced = await s.round(() => dps.push(dp('b', 8)));
    expect(synced.writes).toEqual(['cr-0']);
    expect(condition(s.verdicts.get('u0')!.status!, 'Programmed')).toMatchObject({ reason: 'Pending' });
    await s.controller.close();
  });

  test('data planes syncing while a round writes many first statuses: the CRs not yet written get Programmed at once, never NoDataPlanes first', async () => {
    const dps: DataPlaneView[] = [];
    // The first data plane syncs once the round has written 100 NoDataPlanes statuses.
    const s = setup(
      3000,
      dps,
      () => true,
      (n) => {
        if (n === 100) dps.push(dp('a', 5));
      },
    );
    const { writes } = await s.round();
    expect(s.programmed()).toBe(3000);
    // Only the CRs written before the fleet was read again (the first batch) were written twice.
    const twice = writes.length - 3000;
    expect(twice).toBeGreaterThanOrEqual(100);
    expect(twice).toBeLessThanOrEqual(600);
    await s.controller.close();
  });
});
