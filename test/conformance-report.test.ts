/**
 * The comparison test/cluster/gateway-conformance.test.ts makes between a conformance run and the committed report,
 * on reports of the suite's shape.
 */
import { describe, expect, test } from '@jest/globals';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compareWithBaseline, type ConformanceProfile, readConformanceProfile } from './helpers/conformance-report.js';

function profile(
  core: { passed: number; failed?: string[]; skipped?: string[] },
  extended?: { passed: number; failed?: string[]; features: string[] },
): ConformanceProfile {
  return {
    name: 'GATEWAY-HTTP',
    core: {
      result: 'failure',
      statistics: { Passed: core.passed, Failed: core.failed?.length ?? 0, Skipped: core.skipped?.length ?? 0 },
      failedTests: core.failed,
      skippedTests: core.skipped,
    },
    extended: extended && {
      result: 'success',
      statistics: { Passed: extended.passed, Failed: extended.failed?.length ?? 0, Skipped: 0 },
      failedTests: extended.failed,
      supportedFeatures: extended.features,
    },
  };
}

const baseline = profile(
  { passed: 28, failed: ['A', 'B'], skipped: ['C'] },
  { passed: 2, features: ['HTTPRoutePathRewrite', 'HTTPRouteResponseHeaderModification'] },
);

describe('a conformance run compared with the committed report', () => {
  test('the baseline’s failures skipped and everything else passing is no regression', () => {
    const run = profile({ passed: 28, skipped: ['A', 'B', 'C'] }, { passed: 2, features: ['HTTPRoutePathRewrite', 'HTTPRouteResponseHeaderModification'] });
    expect(compareWithBaseline(baseline, run)).toEqual({ regressions: [], newlyPassing: [] });
  });

  test('a core test that passed and fails now is named; one that failed and passes now is reported apart', () => {
    const run = profile(
      { passed: 28, failed: ['D', 'B'], skipped: ['C'] },
      { passed: 2, features: ['HTTPRoutePathRewrite', 'HTTPRouteResponseHeaderModification'] },
    );
    expect(compareWithBaseline(baseline, run)).toEqual({ regressions: ['core test D passed in the baseline and failed now'], newlyPassing: ['A'] });
  });

  test('an extended feature no longer declared, or its test failing, is a regression', () => {
    const run = profile(
      { passed: 28, failed: ['A', 'B'], skipped: ['C'] },
      { passed: 0, failed: ['HTTPRouteRewritePath'], features: ['HTTPRoutePathRewrite'] },
    );
    expect(compareWithBaseline(baseline, run).regressions).toEqual([
      'extended: 1 tests ran, the baseline ran 2',
      'extended test HTTPRouteRewritePath passed in the baseline and failed now',
      'extended: 0 passed, the baseline passed 2',
      'extended feature HTTPRouteResponseHeaderModification declared in the baseline and not now',
    ]);
  });

  test('a passed test missing from the run (fewer tests, no name) is a regression', () => {
    const run = profile(
      { passed: 27, failed: ['A', 'B'], skipped: ['C'] },
      { passed: 2, features: ['HTTPRoutePathRewrite', 'HTTPRouteResponseHeaderModification'] },
    );
    expect(compareWithBaseline(baseline, run).regressions).toEqual(['core: 30 tests ran, the baseline ran 31', 'core: 27 passed, the baseline passed 28']);
  });

  test('a report file reads as its GATEWAY-HTTP profile; a profile it lacks is an error', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'gatehouse-conformance-report-'));
    try {
      const file = join(dir, 'report.yaml');
      await writeFile(
        file,
        'apiVersion: gateway.networking.k8s.io/v1\nkind: ConformanceReport\ngatewayAPIVersion: v1.4.1\nprofiles:\n- core:\n    failedTests: [A]\n    result: failure\n    statistics: {Failed: 1, Passed: 2, Skipped: 0}\n  name: GATEWAY-HTTP\n',
      );
      expect(readConformanceProfile(file, 'GATEWAY-HTTP').core).toEqual({
        failedTests: ['A'],
        result: 'failure',
        statistics: { Failed: 1, Passed: 2, Skipped: 0 },
      });
      expect(() => readConformanceProfile(file, 'GATEWAY-GRPC')).toThrow('has no profile GATEWAY-GRPC');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
