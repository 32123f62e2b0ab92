/**
 * The Gateway API conformance suite's ConformanceReport (sigs.k8s.io/gateway-api conformance/apis/v1), as
 * scripts/conformance.sh commits it under docs/conformance/, and the comparison of a new run with it. The report
 * names the failed and skipped tests of each profile and counts the passed ones, so a test that passed is one of
 * the run's tests named neither failed nor skipped.
 */
import { readFileSync } from 'node:fs';
import yaml from 'js-yaml';

export interface ConformanceStatus {
  result: string;
  statistics: { Passed: number; Failed: number; Skipped: number };
  failedTests?: string[];
  skippedTests?: string[];
}

export interface ConformanceProfile {
  name: string;
  core: ConformanceStatus;
  extended?: ConformanceStatus & { supportedFeatures?: string[]; unsupportedFeatures?: string[] };
}

export interface ConformanceReport {
  gatewayAPIVersion: string;
  profiles: ConformanceProfile[];
}

export function readConformanceProfile(file: string, name: string): ConformanceProfile {
  const report = yaml.load(readFileSync(file, 'utf8')) as ConformanceReport;
  const profile = report.profiles?.find((p) => p.name === name);
  if (!profile) throw new Error(`${file} has no profile ${name}`);
  return profile;
}

/** The tests of a status that did not pass (failed or skipped). */
export function notPassed(status: ConformanceStatus | undefined): string[] {
  return [...(status?.failedTests ?? []), ...(status?.skippedTests ?? [])].sort();
}

function total(status: ConformanceStatus): number {
  return status.statistics.Passed + status.statistics.Failed + status.statistics.Skipped;
}

export interface Comparison {
  /** One line per test or feature that passed in the baseline and does not now; empty when none. */
  regressions: string[];
  /** Tests that did not pass in the baseline and pass now. */
  newlyPassing: string[];
}

/**
 * Compares a run with the baseline: every core test the baseline passed must pass again, every extended feature it
 * declared must be declared again, and every extended test it passed must pass again. The test sets must be the same
 * size, so that a passed test cannot go missing unnamed.
 */
export function compareWithBaseline(baseline: ConformanceProfile, run: ConformanceProfile): Comparison {
  const regressions: string[] = [];
  const newlyPassing: string[] = [];
  const levels: [string, ConformanceStatus | undefined, ConformanceStatus | undefined][] = [
    ['core', baseline.core, run.core],
    ['extended', baseline.extended, run.extended],
  ];
  for (const [level, before, now] of levels) {
    if (!before) continue;
    if (!now) {
      regressions.push(`no ${level} test ran (the baseline ran ${total(before)})`);
      continue;
    }
    if (total(now) !== total(before)) regressions.push(`${level}: ${total(now)} tests ran, the baseline ran ${total(before)}`);
    const failedBefore = new Set(notPassed(before));
    const failedNow = new Set(notPassed(now));
    for (const test of failedNow)
      if (!failedBefore.has(test))
        regressions.push(`${level} test ${test} passed in the baseline and ${now.failedTests?.includes(test) ? 'failed' : 'was skipped'} now`);
    for (const test of failedBefore) if (!failedNow.has(test)) newlyPassing.push(test);
    if (now.statistics.Passed < before.statistics.Passed)
      regressions.push(`${level}: ${now.statistics.Passed} passed, the baseline passed ${before.statistics.Passed}`);
  }
  const featuresNow = new Set(run.extended?.supportedFeatures ?? []);
  for (const feature of baseline.extended?.supportedFeatures ?? [])
    if (!featuresNow.has(feature)) regressions.push(`extended feature ${feature} declared in the baseline and not now`);
  return { regressions, newlyPassing };
}
