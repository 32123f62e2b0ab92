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
