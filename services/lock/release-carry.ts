/**
 * Releases waiting to be carried into lockdb by the next group of acquire attempts (decision 074).
 *
 * A release's own commit adds nothing an acquire's commit could not carry: the lock is advisory,
 * and a lease ended a few milliseconds later is a lease released a few milliseconds later. So a
 * release waits here, unanswered, for at most `carryMs`: the next acquire group that leaves
 * `take`s every waiting release into its statement; when none comes in time (or `leaveNow` is
 * asked: someone in this process waits for the key; or on close) they leave together, alone.
 * Either way each caller hears its own answer once it has committed, never before.
 */
export interface Waiting<I, O> {
  item: I;
  resolve: (o: O) => void;
  reject: (e: unknown) => void;
}

export interface ReleaseCarry<I, O> {
  /** Waits to be carried (or for its time); resolves with the committed answer. */
  add(item: I): Promise<O>;
  /** Everything waiting, for an acquire group's statement to carry (the caller answers them). */
  take(): Waiting<I, O>[];
  /** Everything waiting leaves now, alone. */
  leaveNow(): void;
  /** Leaves now and waits for the answers (a backend closing). */
  drain(): Promise<void>;
}

export function releaseCarry<I, O>(carryMs: number, alone: (items: I[]) => Promise<O[]>): ReleaseCarry<I, O> {
  let waiting: Waiting<I, O>[] = [];
  let timer: NodeJS.Timeout | undefined;
  const leaving = new Set<Promise<void>>();

  function take(): Waiting<I, O>[] {
    clearTimeout(timer);
    timer = undefined;
    const taken = waiting;
    waiting = [];
    return taken;
  }

  function leaveNow(): void {
    const batch = take();
    if (batch.length === 0) return;
    const settled = (async () => {
      try {
        const answers = await alone(batch.map((w) => w.item));
        if (answers.length !== batch.length) throw new Error(`release carry: ${batch.length} releases, ${answers.length} answers`);
        for (const [i, w] of batch.entries()) w.resolve(answers[i]!);
      } catch (err) {
        for (const w of batch) w.reject(err);
      }
    })();
    leaving.add(settled);
    void settled.finally(() => leaving.delete(settled));
  }

  return {
    add(item) {
      return new Promise<O>((resolve, reject) => {
        waiting.push({ item, resolve, reject });
        if (carryMs <= 0) return leaveNow();
        timer ??= setTimeout(leaveNow, carryMs);
      });
    },
    take,
    leaveNow,
    async drain() {
      leaveNow();
      await Promise.all([...leaving]);
    },
  };
}
