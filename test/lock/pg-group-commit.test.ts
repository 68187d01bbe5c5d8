/**
 * Lock group commit (decision 070, lockdb migration 003) against a real lockdb, logged in as the
 * lock service's own role: acquire attempts, renewals and releases that arrive while a statement
 * of their kind is in lockdb leave together, in one statement and one commit, and each call
 * keeps its own answer, exactly as if its statement had run alone after the ones before it.
 *
 * Commits are counted as PostgreSQL counts them (pg_stat_database.xact_commit of a database only
 * this file uses). Each count includes the one transaction that asks the backend to flush its
 * statistics; the least of three tries is taken, so an autovacuum commit cannot fail it, while a
 * statement per call (the control: LOCKDB_BATCH_MAX=1) always counts one commit per call.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { BackendUnavailableError, type LeaseGrant, type LockBackend } from "../../services/lock/lock-backend.js";
import { leaseHash, newLeaseId } from "../../services/lock/lease-id.js";
import { createPgBackend, RELEASE_CHANNEL, type GroupedStatement, type LockDbBatching } from "../../services/lock/pg-backend.js";
import { PgListener } from "../../services/shared/db/pg-listener.js";
import { uniqueSuffix } from "../support/test-mesh.js";
import { letTimePass } from "../support/time.js";
import { migratedLockdb } from "./lock-fixture.js";

const admin = inject("pgUrl");
const dbName = `lockdb_group${uniqueSuffix()}`;
let lockUrl: string;
let ownerUrl: string;
let lock: pg.Client;
let stats: pg.Client;
let n = 0;

beforeAll(async () => {
  lockUrl = await migratedLockdb(admin, dbName);
  ownerUrl = admin.replace(/\/[^/]*$/, `/${dbName}`);
  lock = new pg.Client({ connectionString: lockUrl });
  await lock.connect();
  // Read from another database: reading pg_stat_database is a transaction of its own.
  stats = new pg.Client({ connectionString: admin });
  await stats.connect();
});

afterAll(async () => {
  await lock?.end();
  await stats?.end();
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  await c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  await c.end();
});

const key = (what: string) => `group/${what}/${++n}`;

async function statOf(column: "xact_commit" | "deadlocks"): Promise<number> {
  const { rows } = await stats.query<{ n: string }>(`SELECT ${column}::text AS n FROM pg_stat_database WHERE datname = $1`, [dbName]);
  return Number(rows[0]!.n);
}

/** How much `column` grows while `work` runs on the databases behind `via` (each asked to flush its counts around it). */
async function growthOf(column: "xact_commit" | "deadlocks", via: Array<{ query: pg.ClientBase["query"] }>, work: () => Promise<unknown>): Promise<number> {
  const settle = async () => {
    let last = await statOf(column);
    for (;;) {
      await letTimePass(150, "a flushed count is published, not signalled: two equal reads in a row are the settled count");
      const now = await statOf(column);
      if (now === last) return now;
      last = now;
    }
  };
  const flush = async () => {
    // FROM a table: a backend flushes its transaction counts only along with some table's, so a
    // flush that reads none would leave its own commit (and those of other table-less
    // transactions) pending until some later statement.
    for (const db of via) await db.query("SELECT pg_stat_force_next_flush() FROM lock_token_floor");
  };
  await flush();
  const before = await settle();
  await work();
  await flush();
  return (await settle()) - before;
}

/** A pg backend on one lockdb connection (so "in lockdb at once" is what the test arranges), and the group sizes it sent. */
async function backendWith(batching: Omit<LockDbBatching, "onBatch">, poolOptions: pg.PoolConfig = {}) {
  const pool = new pg.Pool({ connectionString: lockUrl, max: 1, idleTimeoutMillis: 0, ...poolOptions });
  const sizes: Record<GroupedStatement, number[]> = { acquire: [], renew: [], release: [] };
  const backend = await createPgBackend({
    pool,
    listener: new PgListener({ url: lockUrl, channel: RELEASE_CHANNEL, applicationName: "test-lock-listener" }),
    floor: 0n,
    batching: { ...batching, onBatch: (statement, size) => sizes[statement].push(size) },
  });
  return { pool, backend, sizes };
}

const grouping = { maxBatch: 64, maxInFlight: 1 };
const alone = { maxBatch: 1, maxInFlight: 1 };

async function withBackend<T>(
  batching: Omit<LockDbBatching, "onBatch">,
  fn: (b: Awaited<ReturnType<typeof backendWith>>) => Promise<T>,
  poolOptions?: pg.PoolConfig,
): Promise<T> {
  const b = await backendWith(batching, poolOptions);
  try {
    return await fn(b);
  } finally {
    await b.backend.close();
  }
}

const acquire = (backend: LockBackend, k: string, owner = "group-test", ttlMs = 30_000) => backend.acquire({ key: k, owner, ttlMs, waitMs: 0 });

/** One group acquire statement, as the backend sends it. */
async function acquireGroup(items: Array<{ key: string; owner: string; ttlMs: number }>) {
  const { rows } = await lock.query<{ ord: number; token: string | null; expires_at: Date | null; holder_ms: number | null }>(
    "SELECT ord, token, expires_at, holder_ms FROM lock_acquire_batch($1::text[], $2::bytea[], $3::text[], $4::float8[]) ORDER BY ord",
    [items.map((i) => i.key), items.map(() => leaseHash(newLeaseId())), items.map((i) => i.owner), items.map((i) => i.ttlMs)],
  );
  return rows;
}

describe("lock_acquire_batch", () => {
  it("grants N distinct keys with one statement and one commit; one statement per acquire takes N commits (the control)", async () => {
    const N = 12;
    let together = Number.POSITIVE_INFINITY;
    let apart = Number.POSITIVE_INFINITY;
    for (let attempt = 0; attempt < 3; attempt++) {
      const keys = Array.from({ length: N }, () => key("commits"));
      // Less the one transaction that asks for the flush.
      const g = await growthOf("xact_commit", [lock], async () => {
        const rows = await acquireGroup(keys.map((k) => ({ key: k, owner: "o", ttlMs: 30_000 })));
        expect(rows.map((r) => r.token !== null)).toEqual(Array(N).fill(true));
      });
      together = Math.min(together, g - 1);
      const more = Array.from({ length: N }, () => key("commits"));
      const a = await growthOf("xact_commit", [lock], async () => {
        for (const k of more) expect((await acquireGroup([{ key: k, owner: "o", ttlMs: 30_000 }]))[0]!.token).not.toBeNull();
      });
      apart = Math.min(apart, a - 1);
    }
    expect({ together, apart }).toEqual({ together: 1, apart: N });
  });

  it("a key twice in one group: the first is granted, the second is told the holder's remaining time; tokens rise across groups", async () => {
    const k = key("twice");
    const tokens: bigint[] = [];
    for (let round = 0; round < 3; round++) {
      const [first, second] = await acquireGroup([
        { key: k, owner: `first-${round}`, ttlMs: 20_000 },
        { key: k, owner: `second-${round}`, ttlMs: 5_000 },
      ]);
      expect(first!.token).not.toBeNull();
      expect(second).toMatchObject({ token: null, expires_at: null });
      // The holder's (the first item's) time, not the second's own ttl: both in one transaction, so exactly 20 s.
      expect(second!.holder_ms).toBeCloseTo(20_000, 0);
      tokens.push(BigInt(first!.token!));
      const { rows } = await lock.query<{ owner: string }>("SELECT owner FROM locks WHERE key = $1", [k]);
      expect(rows[0]!.owner).toBe(`first-${round}`);
      // Free the key for the next group: released, the next grant must still be a higher token.
      await lock.query("UPDATE locks SET released_at = now() WHERE key = $1", [k]);
    }
    expect(tokens[1]! > tokens[0]! && tokens[2]! > tokens[1]!).toBe(true);
  });

  it("runs for the lock service's role only: PUBLIC may not execute the group functions", async () => {
    const owner = new pg.Client({ connectionString: ownerUrl });
    await owner.connect();
    try {
      const { rows } = await owner.query<{ proname: string; acl: string[] }>(
        "SELECT proname, proacl::text[] AS acl FROM pg_proc WHERE proname IN ('lock_acquire_batch', 'lock_renew_batch', 'lock_release_batch') ORDER BY proname",
      );
      expect(rows.map((r) => r.proname)).toEqual(["lock_acquire_batch", "lock_release_batch", "lock_renew_batch"]);
      for (const r of rows) {
        expect(r.acl.filter((entry) => entry.startsWith("="))).toEqual([]);
        expect(r.acl.some((entry) => entry.startsWith("railfence_lock=X/"))).toBe(true);
      }
    } finally {
      await owner.end();
    }
  });
});

describe("the pg backend's group commit (natural batching)", () => {
  it("20 concurrent acquires of distinct keys: two commits with grouping (one alone, then the rest together), twenty without (LOCKDB_BATCH_MAX=1)", async () => {
    const count = (batching: typeof grouping) =>
      withBackend(batching, async ({ pool, backend, sizes }) => {
        let fewest = Number.POSITIVE_INFINITY;
        for (let attempt = 0; attempt < 3; attempt++) {
          const keys = Array.from({ length: 20 }, () => key("backend-commits"));
          const commits = await growthOf("xact_commit", [pool], async () => {
            const grants = await Promise.all(keys.map((k) => acquire(backend, k)));
            expect(grants.every((g) => g !== undefined)).toBe(true);
          });
          fewest = Math.min(fewest, commits - 1);
        }
        return { fewest, sizes: sizes.acquire };
      });
    const grouped = await count(grouping);
    expect(grouped.fewest).toBe(2);
    expect(grouped.sizes).toEqual([1, 19, 1, 19, 1, 19]);
    const each = await count(alone);
    expect(each.fewest).toBe(20);
    expect(each.sizes).toEqual(Array(60).fill(1));
  });

  it("two acquires of one key in one group: the first to arrive is granted, the other is refused; each group's grant has a higher token", async () => {
    await withBackend(grouping, async ({ backend, sizes }) => {
      const k = key("same");
      let last = 0n;
      for (let round = 0; round < 3; round++) {
        // The first call leaves alone at once; the two on `k` arrive meanwhile and form one group.
        const [, first, second] = await Promise.all([acquire(backend, key("lead")), acquire(backend, k, "first"), acquire(backend, k, "second")]);
        expect(first?.owner).toBe("first");
        expect(second).toBeUndefined();
        expect(first!.token > last).toBe(true);
        last = first!.token;
        expect(await backend.release({ key: k, leaseId: first!.leaseId })).toBe("released");
      }
      expect(sizes.acquire).toEqual([1, 2, 1, 2, 1, 2]);
    });
  });

  it("releases in one group each get their own answer: released, already_ended, not_held", async () => {
    await withBackend(grouping, async ({ backend, sizes }) => {
      const [k1, k2, k3, lead] = [key("rel"), key("rel"), key("rel"), key("rel-lead")];
      const [g1, g2, g3, gl] = (await Promise.all([k1, k2, k3, lead].map(async (k) => acquire(backend, k)))) as LeaseGrant[];
      expect(await backend.release({ key: k2, leaseId: g2!.leaseId })).toBe("released");
      sizes.release.length = 0;
      const answers = await Promise.all([
        backend.release({ key: lead, leaseId: gl!.leaseId }),
        backend.release({ key: k1, leaseId: g1!.leaseId }),
        backend.release({ key: k2, leaseId: g2!.leaseId }),
        backend.release({ key: k3, leaseId: newLeaseId() }),
        // The same release twice in the group: the second finds the first's release.
        backend.release({ key: k1, leaseId: g1!.leaseId }),
      ]);
      expect(answers).toEqual(["released", "released", "already_ended", "not_held", "already_ended"]);
      expect(sizes.release).toEqual([1, 4]);
      expect((await backend.inspect(k3)).held).toBe(true);
      expect(g3).toBeDefined();
    });
  });

  it("renewals in one group each get their own answer: a live lease keeps its token, an ended one is lost", async () => {
    await withBackend(grouping, async ({ backend, sizes }) => {
      const [live, ended, lead] = [key("renew"), key("renew"), key("renew-lead")];
      const gLive = (await acquire(backend, live, "o", 2_000))!;
      const gEnded = (await acquire(backend, ended))!;
      const gLead = (await acquire(backend, lead))!;
      await backend.release({ key: ended, leaseId: gEnded.leaseId });
      const [, renewed, lost] = await Promise.all([
        backend.renew({ key: lead, leaseId: gLead.leaseId, ttlMs: 30_000 }),
        backend.renew({ key: live, leaseId: gLive.leaseId, ttlMs: 60_000 }),
        backend.renew({ key: ended, leaseId: gEnded.leaseId, ttlMs: 60_000 }),
      ]);
      expect(sizes.renew).toEqual([1, 2]);
      expect(renewed?.token).toBe(gLive.token);
      expect(renewed!.expiresAt.getTime()).toBeGreaterThan(gLive.expiresAt.getTime() + 30_000);
      expect(lost).toBeUndefined();
    });
  });

  it("a group that fails (statement timeout) fails every caller in it as lockdb unavailable, and writes nothing", async () => {
    const owner = new pg.Client({ connectionString: ownerUrl });
    await owner.connect();
    try {
      const [held1, held2, free1, free2] = [key("hung"), key("hung"), key("hung-free"), key("hung-free")];
      await owner.query(
        "INSERT INTO locks (key, token, lease_hash, owner, granted_at, expires_at, released_at) SELECT k, 1, $2, 'x', now(), now(), now() FROM unnest($1::text[]) k",
        [[held1, held2], leaseHash(newLeaseId())],
      );
      // Another transaction holds both rows: any statement that reaches them waits until its timeout.
      await owner.query("BEGIN");
      await owner.query("SELECT 1 FROM locks WHERE key = ANY($1) FOR UPDATE", [[held1, held2]]);
      await withBackend(
        grouping,
        async ({ backend, sizes }) => {
          const results = await Promise.allSettled([acquire(backend, held1), acquire(backend, free1), acquire(backend, held2), acquire(backend, free2)]);
          expect(sizes.acquire).toEqual([1, 3]);
          for (const r of results) {
            expect(r.status).toBe("rejected");
            expect((r as PromiseRejectedResult).reason).toBeInstanceOf(BackendUnavailableError);
          }
        },
        { options: "-c statement_timeout=300" },
      );
      await owner.query("ROLLBACK");
      const { rows } = await owner.query("SELECT key FROM locks WHERE key = ANY($1)", [[free1, free2]]);
      expect(rows).toEqual([]);
    } finally {
      await owner.end();
    }
  });

  it("two groups over the same keys arriving in opposite orders never deadlock: each group locks its rows in key order", async () => {
    const a = await backendWith(grouping);
    const b = await backendWith(grouping);
    try {
      const deadlocks = await growthOf("deadlocks", [a.pool, b.pool], async () => {
        for (let round = 0; round < 4; round++) {
          const keys = Array.from({ length: 24 }, (_, i) => `group/cross/${round}/${String(i).padStart(2, "0")}${uniqueSuffix()}`);
          const reversed = [...keys].reverse();
          const grants = await Promise.all([...keys.map((k) => acquire(a.backend, k, "a")), ...reversed.map((k) => acquire(b.backend, k, "b"))]);
          // Every key granted exactly once, to one of the two.
          expect(grants.filter((g) => g !== undefined)).toHaveLength(keys.length);
        }
      });
      expect(deadlocks).toBe(0);
    } finally {
      await a.backend.close();
      await b.backend.close();
    }
  });
});

describe("releases carried by acquire attempts (decision 074, lockdb migration 004)", () => {
  const carrying = (releaseCarryMs: number) => ({ ...grouping, releaseCarryMs });

  it("a waiting release leaves with the next acquire: one statement and one commit for both; without carrying, two (the control)", async () => {
    const count = (releaseCarryMs: number) =>
      withBackend(carrying(releaseCarryMs), async ({ pool, backend, sizes }) => {
        let fewest = Number.POSITIVE_INFINITY;
        for (let attempt = 0; attempt < 3; attempt++) {
          const [held, next] = [key("carry"), key("carry")];
          const g = (await acquire(backend, held))!;
          const commits = await growthOf("xact_commit", [pool], async () => {
            const released = backend.release({ key: held, leaseId: g.leaseId });
            const granted = await acquire(backend, next);
            expect(granted).toBeDefined();
            expect(await released).toBe("released");
          });
          fewest = Math.min(fewest, commits - 1);
          expect((await backend.inspect(held)).held).toBe(false);
        }
        return { fewest, releases: sizes.release.length };
      });
    expect(await count(60_000)).toEqual({ fewest: 1, releases: 0 });
    expect(await count(0)).toEqual({ fewest: 2, releases: 3 });
  });

  it("a key's release runs before its acquire in the carrying statement: the acquire is granted the next token", async () => {
    await withBackend(carrying(60_000), async ({ backend }) => {
      const k = key("carry-same");
      const first = (await acquire(backend, k, "first"))!;
      const released = backend.release({ key: k, leaseId: first.leaseId });
      // waitMs 0: nobody waits for the key, so the release stays until this acquire carries it.
      const second = await acquire(backend, k, "second");
      expect(await released).toBe("released");
      expect(second?.owner).toBe("second");
      expect(second!.token).toBe(first.token + 1n);
    });
  });

  it("each carried release keeps its own answer: released, already_ended, not_held", async () => {
    await withBackend(carrying(60_000), async ({ backend }) => {
      const [k1, k2, k3] = [key("carry-answers"), key("carry-answers"), key("carry-answers")];
      const g1 = (await acquire(backend, k1))!;
      const g2 = (await acquire(backend, k2))!;
      expect(await Promise.all([backend.release({ key: k2, leaseId: g2.leaseId }), acquire(backend, key("carry-lead"))])).toMatchObject(["released", {}]);
      const answers = Promise.all([
        backend.release({ key: k1, leaseId: g1.leaseId }),
        backend.release({ key: k2, leaseId: g2.leaseId }),
        backend.release({ key: k3, leaseId: newLeaseId() }),
      ]);
      await acquire(backend, key("carry-lead"));
      expect(await answers).toEqual(["released", "already_ended", "not_held"]);
    });
  });

  it("with no acquire to carry it, a release leaves alone when its time is up", async () => {
    await withBackend(carrying(100), async ({ backend, sizes }) => {
      const k = key("carry-alone");
      const g = (await acquire(backend, k))!;
      expect(await backend.release({ key: k, leaseId: g.leaseId })).toBe("released");
      expect(sizes.acquire).toEqual([1]);
      expect((await backend.inspect(k)).held).toBe(false);
    });
  });

  it("an acquire in this process waiting for the key: its release leaves at once, alone, and wakes it", async () => {
    await withBackend(carrying(120_000), async ({ backend, sizes }) => {
      const k = key("carry-waited");
      const first = (await acquire(backend, k, "first", 120_000))!;
      const waiter = backend.acquire({ key: k, owner: "waiter", ttlMs: 30_000, waitMs: 10_000 });
      await letTimePass(200, "the waiter's first attempt is refused and it sleeps, subscribed to the key");
      expect(await backend.release({ key: k, leaseId: first.leaseId })).toBe("released");
      expect((await waiter)?.owner).toBe("waiter");
      // Alone, at once. Left waiting, it would only be carried by the waiter's next attempt, after its sleep.
      expect(sizes.release).toEqual([1]);
    });
  });

  it("closing the backend commits the releases still waiting, and answers them", async () => {
    const b = await backendWith(carrying(120_000));
    const k = key("carry-close");
    const g = (await acquire(b.backend, k))!;
    const released = b.backend.release({ key: k, leaseId: g.leaseId });
    await b.backend.close();
    expect(await released).toBe("released");
    const { rows } = await lock.query<{ released: boolean }>("SELECT released_at IS NOT NULL AS released FROM locks WHERE key = $1", [k]);
    expect(rows[0]!.released).toBe(true);
  });

  it("runs for the lock service's role only: PUBLIC may not execute lock_step_batch", async () => {
    const owner = new pg.Client({ connectionString: ownerUrl });
    await owner.connect();
    try {
      const { rows } = await owner.query<{ acl: string[] }>("SELECT proacl::text[] AS acl FROM pg_proc WHERE proname = 'lock_step_batch'");
      expect(rows).toHaveLength(1);
      expect(rows[0]!.acl.filter((entry) => entry.startsWith("="))).toEqual([]);
      expect(rows[0]!.acl.some((entry) => entry.startsWith("railfence_lock=X/"))).toBe(true);
    } finally {
      await owner.end();
    }
  });
});
