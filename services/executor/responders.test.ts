/**
 * The responder choice (decision 073) on its own: several executors, each with its own view of
 * the same listeners, must pick exactly one responder per sender, share the senders, and answer
 * everything when the view cannot be read.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createLogger } from "../shared/process/logger.js";
import { listenerName, type Responders, startResponders } from "./responders.js";

const opened: Responders[] = [];
afterEach(() => {
  for (const r of opened.splice(0)) r.close();
});

const logger = createLogger("executor", "silent");

/** Starts one executor's responders and waits for its first look at the listeners. */
async function responders(executorId: string, listening: () => Promise<string[]>): Promise<Responders> {
  const r = startResponders({ executorId, listening, refreshMs: 60_000, logger });
  opened.push(r);
  await new Promise((resolve) => setTimeout(resolve, 10));
  return r;
}

describe("responders: one executor per notification", () => {
  it("four executors with the same view: each sender has exactly one responder, and each executor answers a share", async () => {
    const ids = ["exec-a", "exec-b", "exec-c", "exec-d"];
    const all = async () => ids.map(listenerName);
    const views = await Promise.all(ids.map((id) => responders(id, all)));
    expect(views.map((v) => v.known())).toEqual([4, 4, 4, 4]);
    const answered = [0, 0, 0, 0];
    for (let pid = 1000; pid < 1400; pid++) {
      const who = views.map((v) => v.answers(pid));
      expect(who.filter(Boolean)).toHaveLength(1);
      answered[who.indexOf(true)]! += 1;
    }
    // 400 senders over four executors: a rough balance (a broken hash gives one executor all).
    for (const n of answered) expect(n).toBeGreaterThan(50);
  });

  it("an executor the view does not list yet still counts itself: it is a listener, it received the notification", async () => {
    const r = await responders("exec-new", async () => [listenerName("exec-a")]);
    expect(r.known()).toBe(2);
    const mine = Array.from({ length: 200 }, (_, i) => r.answers(2000 + i)).filter(Boolean).length;
    expect(mine).toBeGreaterThan(0);
    expect(mine).toBeLessThan(200);
  });

  it("a view that cannot be read answers every notification (extra claims, never unanswered work)", async () => {
    let fail = false;
    const names = [listenerName("exec-a"), listenerName("exec-b")];
    const r = await responders("exec-a", async () => {
      if (fail) throw new Error("permission denied for pg_stat_activity");
      return names;
    });
    expect(r.known()).toBe(2);
    expect(Array.from({ length: 100 }, (_, i) => r.answers(3000 + i)).every(Boolean)).toBe(false);
    fail = true;
    // lookAgain is rate-limited to once a second: wait it out, then look.
    await new Promise((resolve) => setTimeout(resolve, 1_050));
    r.lookAgain();
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(r.known()).toBe(1);
    expect(Array.from({ length: 100 }, (_, i) => r.answers(3000 + i)).every(Boolean)).toBe(true);
  });
});
