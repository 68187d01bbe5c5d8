/**
 * Natural batching for one statement (group commit): calls that arrive while `maxInFlight`
 * batches are already in the database wait, and leave together as the next batch, in one
 * statement and one commit, as soon as a batch comes back. No timer: at low load a call leaves at
 * once, alone, and pays nothing for the batching; under load the batches grow by themselves to
 * what arrived during one round trip (at most `maxBatch`).
 *
 * Each call gets its own result (`run` answers one result per item, in order) or the batch's
 * error. `sent` is called for each item when its batch is handed to the database: the moment a
 * deadline that counts "from the statement's send" starts.
 */

export interface GroupCommitOptions<I, O> {
  /** Most items in one statement. */
  maxBatch: number;
  /** Batches in the database at once; more calls wait and form the next batch. */
  maxInFlight: number;
  /** Told each batch's size as it leaves (a metric). */
  onBatch?: (size: number) => void;
  /**
   * When a group's statement fails and `aloneWhen(error)` says so (e.g. one row's trigger refused
   * it), each item is run again alone, so that it hears its own answer or error, not another's.
   * Only for statements that wrote nothing when they failed (one transaction: they did not).
   */
  alone?: { run: (item: I) => Promise<O>; when: (error: unknown) => boolean };
}

interface Waiting<I, O> {
  item: I;
  sent?: () => void;
  resolve: (o: O) => void;
  reject: (e: unknown) => void;
}

export type Grouped<I, O> = (item: I, sent?: () => void) => Promise<O>;

export function groupCommit<I, O>(run: (items: I[]) => Promise<O[]>, opts: GroupCommitOptions<I, O>): Grouped<I, O> {
  if (!(opts.maxBatch >= 1 && opts.maxInFlight >= 1)) throw new Error("groupCommit: maxBatch and maxInFlight must be at least 1");
  const queue: Waiting<I, O>[] = [];
  let inFlight = 0;

  function failed(batch: Waiting<I, O>[], err: unknown): void {
    const alone = opts.alone;
    if (alone && batch.length > 1 && alone.when(err)) {
      for (const w of batch) alone.run(w.item).then(w.resolve, w.reject);
      return;
    }
    for (const w of batch) w.reject(err);
  }

  function pump(): void {
    while (inFlight < opts.maxInFlight && queue.length > 0) {
      const batch = queue.splice(0, opts.maxBatch);
      inFlight++;
      opts.onBatch?.(batch.length);
      for (const w of batch) w.sent?.();
      // run() is called synchronously after sent(): nothing of ours runs between the two.
      let done: Promise<O[]>;
      try {
        done = run(batch.map((w) => w.item));
      } catch (err) {
        done = Promise.reject(err);
      }
      // The next group leaves before the callers of this one hear their answers.
      const next = () => {
        inFlight--;
        pump();
      };
      done.then(
        (results) => {
          next();
          if (results.length !== batch.length) {
            const err = new Error(`group commit: ${batch.length} items, ${results.length} results`);
            for (const w of batch) w.reject(err);
            return;
          }
          for (const [i, w] of batch.entries()) w.resolve(results[i]!);
        },
        (err: unknown) => {
          next();
          failed(batch, err);
        },
      );
    }
  }

  return (item, sent) =>
    new Promise<O>((resolve, reject) => {
      queue.push({ item, sent, resolve, reject });
      pump();
    });
}

/**
 * Positions of `items` ordered by `key`, stable (equal keys keep their arrival order). A batch
 * that takes row locks in this order cannot deadlock with another batch that does the same.
 */
export function orderBy<T>(items: T[], key: (t: T) => string): number[] {
  return items
    .map((_, i) => i)
    .sort((a, b) => {
      const ka = key(items[a]!);
      const kb = key(items[b]!);
      return ka < kb ? -1 : ka > kb ? 1 : a - b;
    });
}

/** A batch aborted by a deadlock (40P01) wrote nothing (its transaction rolled back): run it again, at most `tries` times in all. */
export async function againAfterDeadlock<T>(fn: () => Promise<T>, tries = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if ((err as { code?: string }).code !== "40P01" || attempt >= tries) throw err;
    }
  }
}
