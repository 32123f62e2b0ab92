/**
 * What a live process uses, read from /proc (Linux): for tests that bound a process's memory and for the
 * benchmarks (scripts/bench.mjs, scripts/bench-kubernetes.ts), which report memory and CPU per request.
 */
import { readFile } from 'node:fs/promises';

/** USER_HZ on Linux: the unit of /proc/<pid>/stat's CPU times. */
const CLOCK_TICKS = 100;

/** Resident set size (VmRSS) in MiB. */
export async function rssMiB(pid: number): Promise<number> {
  const kb = Number(/VmRSS:\s+(\d+)\s+kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))?.[1]);
  if (!Number.isFinite(kb)) throw new Error(`no VmRSS for pid ${pid}`);
  return kb / 1024;
}

/** CPU seconds (user + system, all threads) used so far: /proc/<pid>/stat fields 14 and 15. */
export async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may hold spaces; the fields after it are read from its closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}
