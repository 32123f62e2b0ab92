/** Runs the tasks given to it one at a time, in the order given; a failed one does not stop the next. */
export type Turns = <T>(task: () => Promise<T>) => Promise<T>;

export function createTurns(): Turns {
  let tail: Promise<unknown> = Promise.resolve();
  return (task) => {
    const run = tail.then(task);
    tail = run.catch(() => undefined);
    return run;
  };
}

/** Resolves once every task given to `turns` so far has settled. */
export const settled = (turns: Turns): Promise<void> => turns(async () => undefined);

/**
 * Runs steps that yield between turns (the `…InTurns` generators: a long pass over a configuration cut into
 * turns, so that a caller serving requests can let them run between) to their end at once.
 */
export function allTurns<T>(steps: Generator<void, T>): T {
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}
