/**
 * Which executor answers a "payouts became payable" notification (decision 073). paydb delivers
 * every notification to every listening executor; when all of them claim, all but one find
 * nothing, and each empty claim is a commit for nothing. So each notification gets one responder:
 * the listening executor that ranks first for the notifying session (rendezvous hashing over the
 * listeners paydb shows in pg_stat_activity), and the others leave it alone.
 *
 * Nothing here is a guard: claims are hints and the fence decides. A view that is wrong only moves
 * a payout's wait or a claim's cost:
 *   - an executor this one does not know yet (it just started): both may answer, one claim wasted;
 *   - one that is gone but still listed (its session not yet dropped, or paused): nobody answers
 *     its share, and the payout waits for the next poll (POLL_INTERVAL_MS), which also makes this
 *     executor look again (lookAgain) at most once a second;
 *   - the view cannot be read: this executor answers everything, as before decision 073.
 */
import { createHash } from "node:crypto";
import type { Logger } from "../shared/process/logger.js";

/** The application name of an executor's LISTEN session: how its peers find it. */
export const listenerName = (executorId: string) => `executor/${executorId}/listener`;

export interface Responders {
  /** Whether this executor answers a notification from the session with this pid. */
  answers(senderPid: number): boolean;
  /** Work was found that no notification brought: read the listeners again (rate-limited). */
  lookAgain(): void;
  /** How many listening executors the current view holds (this one included). */
  known(): number;
  close(): void;
}

export interface RespondersDeps {
  executorId: string;
  listening: () => Promise<string[]>;
  refreshMs: number;
  logger: Logger;
  onView?: (size: number) => void;
}

/** A listener's score for one sender: the highest score answers; ties go to the smaller name. */
const score = (name: string, senderPid: number) => createHash("sha256").update(`${name}|${senderPid}`).digest().readUInt32BE(0);

export function startResponders(deps: RespondersDeps): Responders {
  const self = listenerName(deps.executorId);
  let view: string[] = [self];
  let lastLook = 0;
  let looking = false;
  let closed = false;

  const look = async () => {
    if (looking || closed) return;
    looking = true;
    lastLook = Date.now();
    try {
      const names = new Set(await deps.listening());
      // This executor receives the notification, so it is a listener whatever the view says.
      names.add(self);
      view = [...names].sort();
      deps.onView?.(view.length);
    } catch (err) {
      // Answer everything until the view can be read again: extra claims, never unanswered work.
      view = [self];
      deps.onView?.(1);
      deps.logger.debug({ event: "peers_unreadable", error: err instanceof Error ? err.message : String(err) }, "cannot read the listening executors");
    } finally {
      looking = false;
    }
  };
  void look();
  const timer = setInterval(() => void look(), deps.refreshMs);
  timer.unref();

  return {
    answers(senderPid) {
      if (view.length === 1) return true;
      let best = self;
      let bestScore = -1;
      for (const name of view) {
        const s = score(name, senderPid);
        if (s > bestScore || (s === bestScore && name < best)) {
          best = name;
          bestScore = s;
        }
      }
      return best === self;
    },
    lookAgain() {
      if (Date.now() - lastLook >= 1000) void look();
    },
    known: () => view.length,
    close() {
      closed = true;
      clearInterval(timer);
    },
  };
}
