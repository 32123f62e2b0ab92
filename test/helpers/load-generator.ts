/**
 * Steady HTTP load from the test process: an undici Pool (keep-alive, optional pipelining) with
 * a fixed number of requests in flight, counting answers by outcome. Runs either a fixed number
 * of requests or until `stop()`; a failure (transport error or an unexpected status) is counted
 * and kept as a sample, never thrown, so a fault test can report how many failed.
 */
import { Pool } from 'undici';

export interface LoadOptions {
  /** Origin, e.g. `http://127.0.0.1:8080`. */
  origin: string;
  path: string;
  /** Requests in flight at any time (default 16). */
  concurrency?: number;
  connections?: number;
  pipelining?: number;
  /** Stop after this many requests; without it, run until stop(). */
  requests?: number;
  /** Status that counts as success (default 200). */
  expectStatus?: number;
  /** Per-request bound: a request still unanswered after it counts as failed (default 10 s). */
  timeoutMs?: number;
  /** Connect to this Unix socket instead of the origin's host and port. */
  socketPath?: string;
  /** Stops sending after this long even without stop(), so a failed test leaves no load behind (default 5 min). */
  maxDurationMs?: number;
}

export interface LoadResult {
  sent: number;
  ok: number;
  failed: number;
  /** Up to 10 failure descriptions ("503", "ECONNRESET: …"). */
  failures: string[];
  elapsedMs: number;
}

export interface LoadRun {
  /** Resolves once every request sent so far has been answered. */
  readonly done: Promise<LoadResult>;
  /** Answers so far. */
  progress(): LoadResult;
  /** Sends no new request; resolves like `done`. */
  stop(): Promise<LoadResult>;
}

export function startLoad(options: LoadOptions): LoadRun {
  const {
    origin,
    path,
    concurrency = 16,
    connections = concurrency,
    pipelining = 1,
    requests,
    expectStatus = 200,
    timeoutMs = 10_000,
    socketPath,
    maxDurationMs = 300_000,
  } = options;
  const pool = new Pool(origin, {
    connections,
    pipelining,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    ...(socketPath === undefined ? {} : { connect: { socketPath } }),
  });
  const started = Date.now();
  const result = { sent: 0, ok: 0, failed: 0, failures: [] as string[] };
  let stopping = false;

  const fail = (what: string): void => {
    result.failed += 1;
    if (result.failures.length < 10) result.failures.push(what);
  };
  const snapshot = (): LoadResult => ({ ...result, failures: [...result.failures], elapsedMs: Date.now() - started });

  const worker = async (): Promise<void> => {
    while (!stopping && (requests === undefined || result.sent < requests)) {
      result.sent += 1;
      try {
        const res = await pool.request({ method: 'GET', path });
        await res.body.dump();
        if (res.statusCode === expectStatus) result.ok += 1;
        else fail(String(res.statusCode));
      } catch (err) {
        fail(`${(err as NodeJS.ErrnoException).code ?? 'error'}: ${(err as Error).message}`);
      }
    }
  };

  const cap = setTimeout(() => {
    stopping = true;
  }, maxDurationMs);
  cap.unref();
  const done = Promise.all(Array.from({ length: concurrency }, worker)).then(async () => {
    clearTimeout(cap);
    running.delete(run);
    await pool.close();
    return snapshot();
  });
  const run: LoadRun = {
    done,
    progress: snapshot,
    stop() {
      stopping = true;
      return done;
    },
  };
  running.add(run);
  return run;
}

const running = new Set<LoadRun>();

/**
 * Stops every load still running: for `afterEach`, so that a test failing between startLoad and stop() does not
 * leave requests flowing into the tests after it.
 */
export async function stopAllLoads(): Promise<void> {
  await Promise.all([...running].map((run) => run.stop()));
}
