/**
 * Where an intent's Idempotency-Key lives between process lifetimes. A process that mints a
 * key, sends the request and dies before the answer must, after its restart, retry with the
 * SAME key (or the payout could be created twice): it finds the key here by the intent id the
 * caller chose (an order id, an invoice id — anything the caller can recompute after a crash).
 *
 * `putIfAbsent` must be durable before it returns and atomic: two processes racing on one
 * intent id must end up with one key.
 */
import { randomUUID } from "node:crypto";
import { link, mkdir, open, readFile, readdir, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";

export interface StoredIntentKey {
  /** The Idempotency-Key. */
  key: string;
  /** sha256 of the canonical request: the key is bound to this body. */
  fingerprint: string;
  /** When the key was minted (ms since the epoch). */
  createdAt: number;
  /**
   * When the server forgets the key (ms since the epoch), from the `idempotency-key-expires-at`
   * header of its answer; absent until the server has answered once.
   */
  expiresAt?: number;
}

export interface IntentKeyStore {
  get(intentId: string): Promise<StoredIntentKey | undefined>;
  /** Stores value unless the intent already has a key; returns the key that is stored. */
  putIfAbsent(intentId: string, value: StoredIntentKey): Promise<StoredIntentKey>;
  delete(intentId: string): Promise<void>;
  /**
   * Records when the server forgets the intent's key (learnt from an answer). Optional for a
   * store of your own: without it the expiry is known to this process only, and after a restart
   * the library assumes the conservative default (`keyRetentionMs` from the key's creation).
   */
  recordExpiry?(intentId: string, key: string, expiresAt: number): Promise<void>;
}

/** In-process only: survives retries, not restarts (the default when no store is given). */
export class MemoryKeyStore implements IntentKeyStore {
  private readonly keys = new Map<string, StoredIntentKey>();

  async get(intentId: string): Promise<StoredIntentKey | undefined> {
    return this.keys.get(intentId);
  }

  async putIfAbsent(intentId: string, value: StoredIntentKey): Promise<StoredIntentKey> {
    const existing = this.keys.get(intentId);
    if (existing) return existing;
    this.keys.set(intentId, value);
    return value;
  }

  async delete(intentId: string): Promise<void> {
    this.keys.delete(intentId);
  }

  async recordExpiry(intentId: string, key: string, expiresAt: number): Promise<void> {
    const existing = this.keys.get(intentId);
    if (existing?.key === key) this.keys.set(intentId, { ...existing, expiresAt });
  }
}

/**
 * One JSON file per intent in a directory. Writes go to a temporary file that is fsynced and
 * then hard-linked to its final name: link() fails if the name exists, so the first writer
 * wins atomically and a crash never leaves a half-written key behind.
 */
export class FileKeyStore implements IntentKeyStore {
  constructor(readonly dir: string) {}

  private path(intentId: string): string {
    // Intent ids are caller data: encode them into a safe file name.
    return join(this.dir, `${Buffer.from(intentId, "utf8").toString("base64url")}.json`);
  }

  async get(intentId: string): Promise<StoredIntentKey | undefined> {
    try {
      return JSON.parse(await readFile(this.path(intentId), "utf8")) as StoredIntentKey;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw err;
    }
  }

  async putIfAbsent(intentId: string, value: StoredIntentKey): Promise<StoredIntentKey> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const tmp = join(this.dir, `.tmp-${randomUUID()}`);
    await writeFile(tmp, JSON.stringify(value), { mode: 0o600 });
    const fh = await open(tmp, "r");
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
    try {
      await link(tmp, this.path(intentId));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    } finally {
      await rm(tmp, { force: true });
    }
    // Make the new directory entry durable too.
    const dh = await open(this.dir, "r");
    try {
      await dh.sync();
    } finally {
      await dh.close();
    }
    return (await this.get(intentId))!;
  }

  async delete(intentId: string): Promise<void> {
    await rm(this.path(intentId), { force: true });
  }

  /** Rewrites the intent's file with its expiry: a fsynced temporary file renamed over it. */
  async recordExpiry(intentId: string, key: string, expiresAt: number): Promise<void> {
    const existing = await this.get(intentId);
    if (existing?.key !== key || existing.expiresAt === expiresAt) return;
    const tmp = join(this.dir, `.tmp-${randomUUID()}`);
    await writeFile(tmp, JSON.stringify({ ...existing, expiresAt }), { mode: 0o600 });
    const fh = await open(tmp, "r");
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, this.path(intentId));
  }

  /**
   * Deletes keys minted more than olderThanMs ago. Only for intents whose outcome your system
   * has recorded: an intent id without its key gets a NEW key on the next intent() call, which
   * creates a new payout. A key past the server's retention is still useful: the library looks
   * the payout up by it (LookupPayout) instead of sending it.
   */
  async prune(olderThanMs: number): Promise<number> {
    let removed = 0;
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch {
      return 0;
    }
    for (const name of names.filter((n) => n.endsWith(".json"))) {
      const p = join(this.dir, name);
      try {
        const v = JSON.parse(await readFile(p, "utf8")) as StoredIntentKey;
        if (Date.now() - v.createdAt > olderThanMs) {
          await rm(p, { force: true });
          removed++;
        }
      } catch {
        // a file we cannot read is left for a human
      }
    }
    return removed;
  }
}
