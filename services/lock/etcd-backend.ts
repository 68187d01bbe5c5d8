/**
 * The etcd lock backend. The only lock-service layer that knows etcd.
 *
 * Layout under ETCD_PREFIX (default "railfence/locks/"):
 *   holder/<key>  exists only while the lock is held; attached to an etcd lease with the TTL,
 *                 so etcd's own clock ends it. Value: {owner, lease: sha256(lease id), floor}.
 *   last/<key>    the latest grant (same value), never attached to a lease: it remembers the
 *                 last token and lets the last holder's second Release answer released=false.
 *   floor         the token floor, a ratchet (only ever raised).
 *
 * Acquire is one put-if-absent txn (holder/<key> Create == 0, and floor unchanged) that writes
 * both keys in one revision R; token = floor + R. Revisions are global, persisted and strictly
 * increasing, so tokens strictly increase per key across service and etcd restarts, and exceed
 * the floor (the previous backend's highest token after a switch). Waiting watches holder/<key>
 * for its deletion (release or expiry) from the revision just after the failed txn, so no
 * release can slip between the check and the watch.
 */
import { EtcdLeaseInvalidError, type Etcd3, type IKeyValue, type IRangeResponse } from "etcd3";
import { leaseHash, newLeaseId } from "./lease-id.js";
import {
  BackendUnavailableError,
  type AcquireInput,
  type LeaseGrant,
  type LockBackend,
  type LockState,
  type ReleaseInput,
  type ReleaseOutcome,
  type RenewInput,
} from "./lock-backend.js";
import { attemptUntil, Wakeup, type Attempt } from "./waiting.js";
import { int8 } from "../shared/domain/int8.js";

export interface EtcdBackendOptions {
  client: Etcd3;
  prefix: string;
  /** LOCK_TOKEN_FLOOR: every token issued exceeds it. */
  floor: bigint;
  maxSleepMs?: number;
}

interface GrantValue {
  owner: string;
  /** Hex SHA-256 of the lease id. */
  lease: string;
  /** The floor in force when the grant was made: token = floor + create revision. */
  floor: string;
}

/** Runs an etcd call; any failure of the store means "unavailable", never a guess. */
async function etcd<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw new BackendUnavailableError("etcd is unavailable", { cause: err });
  }
}

const parse = (kv: IKeyValue): GrantValue => JSON.parse(kv.value.toString("utf8")) as GrantValue;
const firstKv = (r: IRangeResponse | undefined): IKeyValue | undefined => r?.kvs[0];
const ttlSeconds = (ttlMs: number) => Math.max(1, Math.ceil(ttlMs / 1000));

export async function createEtcdBackend(opts: EtcdBackendOptions): Promise<LockBackend> {
  const { client, prefix } = opts;
  const holderKey = (key: string) => `${prefix}holder/${key}`;
  const lastKey = (key: string) => `${prefix}last/${key}`;
  const floorKey = `${prefix}floor`;

  /** Orphan leases would expire anyway; revoking them promptly keeps etcd tidy. */
  const revokeQuietly = (id: string) => void client.leaseClient.leaseRevoke({ ID: id }).catch(() => {});

  // The floor as a ratchet: raise the stored floor to the configured one, never lower it.
  let floor = 0n;
  let floorRevision = "0";
  for (;;) {
    const kv = firstKv(await etcd(() => client.get(floorKey).exec()));
    const stored = kv ? int8(kv.value.toString("utf8")) : 0n;
    if (kv && stored >= opts.floor) {
      floor = stored;
      floorRevision = kv.mod_revision;
      break;
    }
    const target = stored > opts.floor ? stored : opts.floor;
    const txn = await etcd(() =>
      client
        .if(floorKey, "Mod", "==", kv?.mod_revision ?? 0)
        .then(client.put(floorKey).value(target.toString()))
        .commit(),
    );
    if (txn.succeeded) {
      floor = target;
      floorRevision = txn.header.revision;
      break;
    }
  }

  type EtcdAttempt = Attempt<LeaseGrant> & { revision?: string };

  async function attempt(key: string, owner: string, ttlMs: number): Promise<EtcdAttempt> {
    for (;;) {
      const usedFloor = floor;
      const usedFloorRevision = floorRevision;
      const leaseId = newLeaseId();
      const value = JSON.stringify({ owner, lease: leaseHash(leaseId).toString("hex"), floor: usedFloor.toString() } satisfies GrantValue);
      const sentAt = Date.now();
      const grant = await etcd(() => client.leaseClient.leaseGrant({ TTL: ttlSeconds(ttlMs), ID: 0 }));
      let txn;
      try {
        txn = await client
          .if(holderKey(key), "Create", "==", 0)
          .and(floorKey, "Mod", "==", usedFloorRevision)
          .then(client.put(holderKey(key)).value(value).lease(grant.ID), client.put(lastKey(key)).value(value))
          .else(client.get(floorKey))
          .commit();
      } catch (err) {
        // The put may have landed with its answer lost: revoking the lease undoes it.
        revokeQuietly(grant.ID);
        throw new BackendUnavailableError("etcd is unavailable", { cause: err });
      }
      if (txn.succeeded) {
        // etcd starts the TTL when it applies the grant, after sentAt: this estimate is never late.
        const expiresAt = new Date(sentAt + Number(grant.TTL) * 1000);
        return { granted: { key, leaseId, owner, token: usedFloor + int8(txn.header.revision), expiresAt } };
      }
      revokeQuietly(grant.ID);
      const floorKv = firstKv(txn.responses[0]?.response_range);
      if (floorKv && floorKv.mod_revision !== usedFloorRevision) {
        // Another replica raised the floor: adopt it and try again.
        const raised = int8(floorKv.value.toString("utf8"));
        if (raised > floor) floor = raised;
        floorRevision = floorKv.mod_revision;
        continue;
      }
      return { revision: txn.header.revision };
    }
  }

  /** Watches holder/<key> for deletion from fromRevision on; returns the cancel function. */
  function watchRelease(key: string, fromRevision: string, onRelease: () => void): () => void {
    const watcher = client.watch().key(holderKey(key)).only("delete").startRevision(fromRevision).watcher();
    // Watch stream trouble is not fatal: waiters fall back on their bounded poll.
    watcher.on("error", () => {});
    watcher.on("delete", onRelease);
    watcher.on("disconnected", onRelease);
    return () => void watcher.cancel().catch(() => {});
  }

  return {
    name: "etcd",
    get floor() {
      return floor;
    },

    async acquire(input: AcquireInput): Promise<LeaseGrant | undefined> {
      const { key, owner, ttlMs } = input;
      if (input.waitMs === 0) return (await attempt(key, owner, ttlMs)).granted;
      const wakeup = new Wakeup();
      let cancelWatch: (() => void) | undefined;
      try {
        return await attemptUntil({
          waitMs: input.waitMs,
          signal: input.signal,
          wakeup,
          maxSleepMs: opts.maxSleepMs,
          attempt: async () => {
            const r = await attempt(key, owner, ttlMs);
            if (r.granted === undefined && r.revision && !cancelWatch) {
              cancelWatch = watchRelease(key, (int8(r.revision) + 1n).toString(), () => wakeup.kick());
            }
            return r;
          },
        });
      } finally {
        cancelWatch?.();
      }
    },

    async renew(input: RenewInput): Promise<LeaseGrant | undefined> {
      const hash = leaseHash(input.leaseId).toString("hex");
      const kv = firstKv(await etcd(() => client.get(holderKey(input.key)).exec()));
      if (!kv) return undefined;
      const value = parse(kv);
      if (value.lease !== hash) return undefined;
      // etcd cannot change a lease's TTL: attach the key to a fresh lease with the new TTL. The
      // key is rewritten, not recreated, so its create revision (the token) is kept.
      const sentAt = Date.now();
      const grant = await etcd(() => client.leaseClient.leaseGrant({ TTL: ttlSeconds(input.ttlMs), ID: 0 }));
      let txn;
      try {
        txn = await client
          .if(holderKey(input.key), "Mod", "==", kv.mod_revision)
          .then(client.put(holderKey(input.key)).value(kv.value).lease(grant.ID))
          .commit();
      } catch (err) {
        // Revoking the new lease ends the lease if the rewrite landed: early end is safe, a
        // lease the holder cannot know about is not.
        revokeQuietly(grant.ID);
        throw new BackendUnavailableError("etcd is unavailable", { cause: err });
      }
      if (!txn.succeeded) {
        revokeQuietly(grant.ID);
        return undefined;
      }
      revokeQuietly(kv.lease);
      return {
        key: input.key,
        leaseId: input.leaseId,
        owner: value.owner,
        token: int8(value.floor) + int8(kv.create_revision),
        expiresAt: new Date(sentAt + Number(grant.TTL) * 1000),
      };
    },

    async release(input: ReleaseInput): Promise<ReleaseOutcome> {
      const hash = leaseHash(input.leaseId).toString("hex");
      const [holder, last] = await etcd(() => Promise.all([client.get(holderKey(input.key)).exec(), client.get(lastKey(input.key)).exec()]));
      const hkv = firstKv(holder);
      if (hkv && parse(hkv).lease === hash) {
        // Revoking the etcd lease deletes holder/<key> (the only key attached to it) atomically.
        try {
          await client.leaseClient.leaseRevoke({ ID: hkv.lease });
          return "released";
        } catch (err) {
          if (err instanceof EtcdLeaseInvalidError) return "already_ended";
          throw new BackendUnavailableError("etcd is unavailable", { cause: err });
        }
      }
      const lkv = firstKv(last);
      return lkv && parse(lkv).lease === hash ? "already_ended" : "not_held";
    },

    async inspect(key: string): Promise<LockState> {
      const [holder, last] = await etcd(() => Promise.all([client.get(holderKey(key)).exec(), client.get(lastKey(key)).exec()]));
      const lkv = firstKv(last);
      const lastToken = lkv ? int8(parse(lkv).floor) + int8(lkv.mod_revision) : 0n;
      const hkv = firstKv(holder);
      const free: LockState = { key, held: false, owner: "", token: 0n, expiresAt: undefined, lastToken };
      if (!hkv) return free;
      const sentAt = Date.now();
      const ttl = await etcd(() => client.leaseClient.leaseTimeToLive({ ID: hkv.lease }));
      if (Number(ttl.TTL) < 0) return free;
      const value = parse(hkv);
      return {
        key,
        held: true,
        owner: value.owner,
        token: int8(value.floor) + int8(hkv.create_revision),
        expiresAt: new Date(sentAt + Number(ttl.TTL) * 1000),
        lastToken,
      };
    },

    async close(): Promise<void> {
      client.close();
    },
  };
}
