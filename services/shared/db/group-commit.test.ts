/** groupCommit's batching rules, without a database: what leaves together, and who hears what. */
import { describe, expect, it } from "vitest";
import { againAfterDeadlock, groupCommit, orderBy } from "./group-commit.js";

/** A statement that answers when told to, recording each group it was given. */
function statement<I>() {
  const groups: I[][] = [];
  const pending: Array<{ items: I[]; answer: (fail?: Error) => void }> = [];
  const run = (items: I[]) =>
    new Promise<string[]>((resolve, reject) => {
      groups.push(items);
      pending.push({ items, answer: (fail) => (fail ? reject(fail) : resolve(items.map((i) => `ok:${String(i)}`))) });
    });
  return { run, groups, next: () => pending.shift()! };
}

describe("groupCommit", () => {
  it("the first call leaves at once, alone; what arrives while it is out leaves together when it returns", async () => {
    const s = statement<number>();
    const grouped = groupCommit(s.run, { maxBatch: 10, maxInFlight: 1 });
    const sent: number[] = [];
    const calls = [1, 2, 3, 4].map((i) => grouped(i, () => sent.push(i)));
    expect(s.groups).toEqual([[1]]);
    expect(sent).toEqual([1]);
    s.next().answer();
    await calls[0];
    expect(s.groups).toEqual([[1], [2, 3, 4]]);
    expect(sent).toEqual([1, 2, 3, 4]);
    s.next().answer();
    expect(await Promise.all(calls)).toEqual(["ok:1", "ok:2", "ok:3", "ok:4"]);
  });

  it("never more than maxBatch items in one statement, nor more than maxInFlight statements out", async () => {
    const s = statement<number>();
    const grouped = groupCommit(s.run, { maxBatch: 2, maxInFlight: 2 });
    const calls = [1, 2, 3, 4, 5, 6, 7].map((i) => grouped(i));
    expect(s.groups).toEqual([[1], [2]]);
    s.next().answer();
    await calls[0];
    expect(s.groups).toEqual([[1], [2], [3, 4]]);
    s.next().answer();
    s.next().answer();
    await Promise.all(calls.slice(0, 4));
    expect(s.groups.slice(3)).toEqual([[5, 6], [7]]);
    s.next().answer();
    s.next().answer();
    expect(await Promise.all(calls)).toHaveLength(7);
  });

  it("a failed statement fails every call of its group and no other", async () => {
    const s = statement<number>();
    const grouped = groupCommit(s.run, { maxBatch: 10, maxInFlight: 1 });
    const first = grouped(1);
    const rest = [grouped(2), grouped(3)];
    s.next().answer();
    await first;
    s.next().answer(new Error("paydb went away"));
    for (const r of rest) await expect(r).rejects.toThrow("paydb went away");
    const after = grouped(4);
    s.next().answer();
    expect(await after).toBe("ok:4");
  });

  it("a statement that answers a different number of results than items fails the whole group", async () => {
    const grouped = groupCommit(async (items: number[]) => items.slice(1).map(String), { maxBatch: 10, maxInFlight: 1 });
    await expect(grouped(1)).rejects.toThrow("1 items, 0 results");
  });
});

describe("groupCommit, alone after a refused group", () => {
  it("when the group's statement is refused for one row, each item runs alone and hears its own answer", async () => {
    const groups: number[][] = [];
    const grouped = groupCommit(
      async (items: number[]) => {
        groups.push(items);
        if (items.includes(13)) throw Object.assign(new Error("row 13 refused"), { code: "P0001" });
        return items.map(String);
      },
      {
        maxBatch: 10,
        maxInFlight: 1,
        alone: {
          run: async (i) => {
            if (i === 13) throw new Error("13 alone: refused");
            return `alone:${i}`;
          },
          when: (e) => (e as { code?: string }).code === "P0001",
        },
      },
    );
    const first = grouped(1);
    const rest = [grouped(12), grouped(13), grouped(14)];
    await first;
    await expect(rest[0]).resolves.toBe("alone:12");
    await expect(rest[1]).rejects.toThrow("13 alone: refused");
    await expect(rest[2]).resolves.toBe("alone:14");
    expect(groups).toEqual([[1], [12, 13, 14]]);
  });
});

describe("orderBy", () => {
  it("orders positions by key and keeps arrival order among equal keys", () => {
    const items = ["b#1", "a#2", "b#3", "a#4", "c#5"];
    expect(orderBy(items, (s) => s.split("#")[0]!).map((i) => items[i])).toEqual(["a#2", "a#4", "b#1", "b#3", "c#5"]);
  });
});

describe("againAfterDeadlock", () => {
  const deadlock = () => Object.assign(new Error("deadlock detected"), { code: "40P01" });

  it("runs a batch aborted by a deadlock again, at most three times in all", async () => {
    let runs = 0;
    expect(await againAfterDeadlock(async () => (++runs < 3 ? Promise.reject(deadlock()) : "done"))).toBe("done");
    expect(runs).toBe(3);
    runs = 0;
    await expect(againAfterDeadlock(async () => (++runs, Promise.reject(deadlock())))).rejects.toThrow("deadlock detected");
    expect(runs).toBe(3);
  });

  it("does not run a batch again after any other error", async () => {
    let runs = 0;
    await expect(againAfterDeadlock(async () => (++runs, Promise.reject(Object.assign(new Error("timeout"), { code: "57014" }))))).rejects.toThrow("timeout");
    expect(runs).toBe(1);
  });
});
