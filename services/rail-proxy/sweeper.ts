/**
 * The ambiguity sweeper: FORWARDING rows older than the rail deadline plus a margin belong to
 * a replica that died between commit and answer. It turns them into TIMEOUT (ambiguous) and
 * keeps the unresolved gauge current. It never forwards anything (UC-07).
 *
 * It also closes UNKNOWN payouts whose submissions are all closed (store.closeSettledUnknown):
 * the statements that close a submission close its payout too, and this catches the payouts they
 * could not see, so closing a payout from its submission has one writer, rail-proxy (decision 066).
 */
import type { Logger } from "../shared/process/logger.js";
import type { ProxyMetrics } from "./proxy-metrics.js";
import type { SubmissionStore } from "./submission-store.js";

/** UNKNOWN payouts closed per tick at most (the rest wait for the next one). */
const CLOSE_LIMIT = 500;

export function startSweeper(store: SubmissionStore, metrics: ProxyMetrics, logger: Logger, intervalMs: number): () => void {
  let running = false;
  // [rule:crash]
  const tick = async () => {
    if (running) return;
    running = true;
    try {
      const swept = await store.sweepStaleForwarding();
      if (swept > 0) logger.warn({ event: "stale_forwarding_swept", count: swept }, "submissions became ambiguous (replica died mid-call)");
      for (const closed of await store.closeSettledUnknown(CLOSE_LIMIT))
        logger.info(
          { event: "payout_closed_from_submission", payout_id: closed.payout_id, state: closed.state, submission: closed.submission },
          "an UNKNOWN payout whose submissions are all closed was closed from the one that decides it",
        );
      const { count, oldestAgeSeconds } = await store.countUnresolved();
      metrics.ambiguousUnresolved.set(count);
      metrics.ambiguousOldestAge.set(oldestAgeSeconds);
    } catch {
      // paydb down: the next tick tries again; admission reports the outage to callers.
    } finally {
      running = false;
    }
  };
  // [/rule:crash]
  const timer = setInterval(() => void tick(), intervalMs);
  timer.unref();
  void tick();
  return () => clearInterval(timer);
}
