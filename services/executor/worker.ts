/**
 * The claim loop: keeps up to `concurrency` payouts in flight, claiming more as slots free up,
 * when told that payouts became payable (`nudge`, from paydb's notifications: decision 069), and
 * every `pollIntervalMs` when neither happens. The poll stays: deferred retries and lapsed claims
 * become payable without any write to announce them, and a notification sent while the listener
 * was down is lost. Claims use FOR UPDATE SKIP LOCKED, so executors never double-claim; lapsed
 * PROCESSING claims are taken over (fencing keeps that safe).
 *
 * What is worth a claim (decision 073): a claim that finds nothing is still a commit. So in notify
 * mode a payout that ends claims again only when something may be waiting: a notification came
 * while every slot was busy, or the last claim filled every free slot (more may be left). And of
 * the executors that all receive a notification, one answers it (responders.ts) unless this one's
 * last claim was full: then work is piling up, and everyone helps.
 *
 * Drain: stop claiming, let in-flight payouts finish within drainMs, then tell the rest to
 * abandon (a payout not yet submitted is given back; one already submitted keeps waiting for
 * its answer, bounded by the call timeout). Leases are released on every path.
 */
import type { Logger } from "../shared/process/logger.js";
import type { ExecutorMetrics } from "./executor-metrics.js";
import type { PayOutcome } from "./pay-one.js";
import type { ClaimedPayout, PayoutStore } from "./payout-store.js";
import type { Responders } from "./responders.js";

export interface WorkerDeps {
  store: PayoutStore;
  payOne: (p: ClaimedPayout, signal: AbortSignal) => Promise<PayOutcome>;
  metrics: ExecutorMetrics;
  logger: Logger;
  executorId: string;
  concurrency: number;
  pollIntervalMs: number;
  /** How long a fresh claim holds before it lapses (time to get the lock). */
  claimMs: number;
  /**
   * Claim after every payout that ends, found work or not (poll mode: nothing else tells it that
   * work is waiting). false (notify mode): only when something may be waiting.
   */
  claimAfterEveryFinish: boolean;
  /** Which notifications this executor answers; undefined: all of them (EXECUTOR_ANSWER=all). */
  responders?: Pick<Responders, "answers" | "lookAgain"> | undefined;
  /**
   * Decision 075: a notification that names an account, answered with a free slot, takes the
   * account's lock and its oldest payable payout in one statement instead of a claim. "claim":
   * it did not get that far, claim instead. undefined: every notification is answered by a claim.
   */
  payNext?: ((accountId: string, signal: AbortSignal) => Promise<PayOutcome | "nothing" | "claim">) | undefined;
}

export interface Worker {
  /**
   * Payouts may have become payable: claim now instead of waiting out the poll interval. One that
   * arrives while a claim is in flight makes the loop claim once more (the payout may have
   * committed after that claim's snapshot), never sleep. senderPid: the paydb session that
   * announced them, when a notification did (then only its responder answers); undefined: the
   * listener reconnected, and everyone looks. accountId: the account the notification named.
   */
  nudge(senderPid?: number, accountId?: string): void;
  /** Stops claiming and drains; resolves when nothing is in flight. */
  stop(drainMs: number): Promise<void>;
}

/** What ended an idle wait (railfence_executor_wakeups_total{cause}). */
type WakeCause = "notify" | "poll" | "finished" | "stop";

export function startWorker(deps: WorkerDeps): Worker {
  const inFlight = new Set<Promise<void>>();
  const abandon = new AbortController();
  let stopping = false;
  // Set by a nudge, cleared when a claim is sent: a nudge during a claim is not lost.
  let dirty = false;
  // The last claim filled every slot it asked for: more payouts may be waiting.
  let backlog = false;
  let wake: (cause: WakeCause) => void = () => {};
  const idle = (ms: number) =>
    new Promise<WakeCause>((resolve) => {
      const t = setTimeout(() => done("poll"), ms);
      function done(cause: WakeCause) {
        clearTimeout(t);
        wake = () => {};
        resolve(cause);
      }
      wake = done;
    });

  const run = (p: ClaimedPayout) => occupy(deps.payOne(p, abandon.signal), p.payoutId);

  /** A slot taken by a notification that named an account (decision 075). */
  const runNext = (payNext: NonNullable<WorkerDeps["payNext"]>, accountId: string) =>
    occupy(
      payNext(accountId, abandon.signal).then((r) => {
        if (r !== "claim" || stopping) return;
        // Not as far as a payout: a claim looks instead, as it would have without the name.
        dirty = true;
        wake("notify");
      }),
      `(next of ${accountId})`,
    );

  const occupy = (attempt: Promise<unknown>, what: string) => {
    deps.metrics.inFlight.inc();
    const task: Promise<void> = attempt
      .then(
        () => undefined,
        (err: unknown) => {
          // pay-one handles every expected failure; this is a bug, logged once. The claim lapses.
          deps.logger.error({ event: "payout_crashed", payout_id: what, error: err instanceof Error ? err.message : String(err) }, "payout attempt crashed");
        },
      )
      .finally(() => {
        deps.metrics.inFlight.dec();
        inFlight.delete(task);
        wake("finished");
      });
    inFlight.add(task);
  };

  const loop = (async () => {
    let paydbDown = false;
    let cause: WakeCause | "start" | "more" = "start";
    while (!stopping) {
      const free = deps.concurrency - inFlight.size;
      let claimed = 0;
      let reached = false;
      const worthClaiming = cause !== "finished" || deps.claimAfterEveryFinish || dirty || backlog;
      if (free > 0 && worthClaiming) {
        dirty = false;
        try {
          const rows = await deps.store.claim(deps.executorId, free, deps.claimMs);
          if (paydbDown) deps.logger.info({ event: "paydb_back" }, "paydb reachable again; claiming");
          paydbDown = false;
          claimed = rows.length;
          reached = true;
          backlog = claimed === free;
          deps.metrics.claims.inc({ found: claimed > 0 ? "payouts" : "none" });
          // The poll found work no notification brought (a deferred retry, a lapsed claim, or a
          // notification left to an executor that is gone): the view of who answers may be stale.
          if (cause === "poll" && claimed > 0) deps.responders?.lookAgain();
          for (const p of rows) run(p);
          // Liveness (decision 061): only a pass that reached paydb counts. A loop that cannot
          // claim, or has stopped, lets this age, and ExecutorsAbsent pages. With every slot busy
          // no pass runs; each attempt is bounded by the call timeouts, so a slot frees long
          // before the alert's threshold.
          deps.metrics.lastPass.set(Date.now() / 1000);
        } catch (err) {
          // Logged once per outage, not once per poll.
          if (!paydbDown) deps.logger.warn({ event: "claim_failed", error: err instanceof Error ? err.message : String(err) }, "cannot claim payouts");
          paydbDown = true;
        }
      }
      if (stopping) break;
      // A full batch suggests more work is waiting: claim again as soon as a slot is free.
      if (free > 0 && claimed === free && inFlight.size < deps.concurrency) {
        cause = "more";
        continue;
      }
      // Told during that claim: what was announced may have committed after its snapshot. (Not
      // after a failed claim: paydb is down, and the poll paces the retries.)
      if (dirty && reached && inFlight.size < deps.concurrency) {
        deps.metrics.wakeups.inc({ cause: "notify" });
        cause = "notify";
        continue;
      }
      cause = await idle(deps.pollIntervalMs);
      if (cause !== "stop") deps.metrics.wakeups.inc({ cause });
    }
  })();

  return {
    nudge(senderPid, accountId) {
      const mine = senderPid === undefined || backlog || !deps.responders || deps.responders.answers(senderPid);
      // The named account's payout, at once, in a free slot: its lock, then one statement that
      // claims and fences. Not in backlog (everyone answers then: a claim shares the work out).
      const next = mine && accountId !== undefined && deps.payNext && !backlog && !stopping && inFlight.size < deps.concurrency;
      deps.metrics.notifications.inc({ answer: next ? "fence" : mine ? "claim" : "left" });
      if (!mine) return;
      if (next) return runNext(deps.payNext!, accountId!);
      dirty = true;
      wake("notify");
    },
    async stop(drainMs: number) {
      stopping = true;
      wake("stop");
      await loop;
      const all = Promise.all([...inFlight]);
      let timer: NodeJS.Timeout | undefined;
      const drained = await Promise.race([all.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), drainMs)))]);
      clearTimeout(timer);
      if (!drained) {
        deps.logger.warn({ event: "drain_abandon", in_flight: inFlight.size }, "drain bound reached; abandoning payouts not yet submitted");
        abandon.abort(new Error("executor shutting down"));
        await Promise.all([...inFlight]);
      }
    },
  };
}
