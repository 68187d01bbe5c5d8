/**
 * Backend switch with a token floor (docs/lock.md, "Switching backends"): tokens issued after a
 * switch exceed every token issued before it, in both directions, and the floor is a ratchet
 * (restarting without it does not lower tokens). The negative control shows the floor is what
 * makes this true: without it a fresh etcd issues tokens below the pg ones.
 */
import { afterAll, beforeAll, expect, inject, it } from "vitest";
import { EtcdServer } from "../../tools/harness/etcd.js";
import { describeWithEtcd } from "../support/etcd-suite.js";
import { uniqueSuffix } from "../support/test-mesh.js";
import { LockServiceUnderTest, migratedLockdb, type LockClient } from "./lock-fixture.js";

const KEY = "account:switch-1";

async function grantTimes(client: LockClient, key: string, n: number): Promise<bigint> {
  let token = 0n;
  for (let i = 0; i < n; i++) {
    const { lease } = await client.acquire({ key, owner: "switch-test", ttlMs: 10_000, waitMs: 0 });
    token = lease!.fencingToken;
    await client.release({ key, leaseId: lease!.leaseId });
  }
  return token;
}

describeWithEtcd("lock backend switch with LOCK_TOKEN_FLOOR", () => {
  let etcd: EtcdServer;
  let lockdbUrl: string;
  const services: LockServiceUnderTest[] = [];
  const start = async (env: Record<string, string>) => {
    const svc = new LockServiceUnderTest(env);
    services.push(svc);
    return svc.start();
  };
  const pgEnv = () => ({ LOCK_BACKEND: "pg", LOCKDB_URL: lockdbUrl });
  const etcdEnv = (prefix: string) => ({ LOCK_BACKEND: "etcd", ETCD_ENDPOINTS: etcd.endpoint, ETCD_PREFIX: prefix });

  beforeAll(async () => {
    lockdbUrl = await migratedLockdb(inject("pgUrl"), `lockdb_switch${uniqueSuffix()}`);
    etcd = await EtcdServer.start();
  });

  afterAll(async () => {
    await Promise.all(services.map((s) => s.stop()));
    await etcd?.destroy();
  });

  it("pg -> etcd -> pg: every token after a switch exceeds every token before it", async () => {
    const onPg = await start(pgEnv());
    const lastPg = await grantTimes(onPg.client, KEY, 40);
    expect((await onPg.client.inspect({ key: KEY })).lastToken).toBe(lastPg);
    await onPg.stop();

    const onEtcd = await start({ ...etcdEnv("switch/"), LOCK_TOKEN_FLOOR: lastPg.toString() });
    const firstEtcd = await grantTimes(onEtcd.client, KEY, 1);
    expect(firstEtcd).toBeGreaterThan(lastPg);
    // Every key, not only the ones pg knew: the floor is global.
    expect(await grantTimes(onEtcd.client, "account:never-seen-on-pg", 1)).toBeGreaterThan(lastPg);
    const lastEtcd = await grantTimes(onEtcd.client, KEY, 5);
    await onEtcd.stop();

    // The floor is a ratchet: a restart that forgets LOCK_TOKEN_FLOOR still issues higher tokens.
    const forgetful = await start(etcdEnv("switch/"));
    expect(forgetful.proc.ready?.token_floor).toBe(lastPg.toString());
    expect(await grantTimes(forgetful.client, KEY, 1)).toBeGreaterThan(lastEtcd);
    const lastBeforeBack = (await forgetful.client.inspect({ key: KEY })).lastToken;
    await forgetful.stop();

    const backOnPg = await start({ ...pgEnv(), LOCK_TOKEN_FLOOR: lastBeforeBack.toString() });
    expect(await grantTimes(backOnPg.client, KEY, 1)).toBeGreaterThan(lastBeforeBack);
    expect(await grantTimes(backOnPg.client, "account:never-seen-anywhere", 1)).toBeGreaterThan(lastBeforeBack);
    await backOnPg.stop();

    const pgForgetful = await start(pgEnv());
    expect(await grantTimes(pgForgetful.client, "account:fresh-after-restart", 1)).toBeGreaterThan(lastBeforeBack);
    await pgForgetful.stop();
  });

  it("negative control: without a floor a fresh etcd issues tokens at or below the old pg tokens", async () => {
    const onPg = await start(pgEnv());
    const lastPg = await grantTimes(onPg.client, "account:control", 40);
    await onPg.stop();
    const noFloor = await start(etcdEnv(`control${uniqueSuffix()}/`));
    // etcd revisions on this young cluster are far below 40 grants' worth of pg tokens.
    expect(await grantTimes(noFloor.client, "account:control", 1)).toBeLessThanOrEqual(lastPg);
    await noFloor.stop();
  });
});
