import { describe, expect, it } from "vitest";
import { readConfig } from "../../services/lock/config.js";

describe("lock service config", () => {
  it("defaults to the pg backend on port 7100 with floor 0", () => {
    const c = readConfig({ LOCKDB_URL: "postgres://lock@db/lockdb" });
    expect(c).toMatchObject({ backend: "pg", port: 7100, metricsPort: 9100, tokenFloor: 0n, etcdPrefix: "railfence/locks/" });
  });

  it("groups lockdb statements by default (32 calls, 2 in flight); LOCKDB_BATCH_MAX=1 runs each call alone", () => {
    expect(readConfig({ LOCKDB_URL: "postgres://lock@db/lockdb" })).toMatchObject({ lockdbBatchMax: 32, lockdbBatchesInFlight: 2 });
    expect(readConfig({ LOCKDB_URL: "postgres://lock@db/lockdb", LOCKDB_BATCH_MAX: "1", LOCKDB_BATCHES_IN_FLIGHT: "4" })).toMatchObject({
      lockdbBatchMax: 1,
      lockdbBatchesInFlight: 4,
    });
    expect(() => readConfig({ LOCKDB_URL: "postgres://lock@db/lockdb", LOCKDB_BATCH_MAX: "0" })).toThrow(/LOCKDB_BATCH_MAX/);
  });

  it("a release waits up to 50 ms to share an acquire group's commit by default; 0 sends each at once; a negative wait is refused", () => {
    expect(readConfig({ LOCKDB_URL: "postgres://lock@db/lockdb" }).lockdbReleaseCarryMs).toBe(50);
    expect(readConfig({ LOCKDB_URL: "postgres://lock@db/lockdb", LOCKDB_RELEASE_CARRY_MS: "0" }).lockdbReleaseCarryMs).toBe(0);
    expect(() => readConfig({ LOCKDB_URL: "postgres://lock@db/lockdb", LOCKDB_RELEASE_CARRY_MS: "-1" })).toThrow(/LOCKDB_RELEASE_CARRY_MS/);
  });

  it("reads a floor beyond 2^53 exactly", () => {
    const c = readConfig({ LOCK_BACKEND: "etcd", ETCD_ENDPOINTS: "http://a:2379, http://b:2379", LOCK_TOKEN_FLOOR: "9007199254740993" });
    expect(c.tokenFloor).toBe(9007199254740993n);
    expect(c.etcdEndpoints).toEqual(["http://a:2379", "http://b:2379"]);
  });

  it("lists every problem at once and refuses to start", () => {
    let message = "";
    try {
      readConfig({ LOCK_BACKEND: "etcd", ETCD_ENDPOINTS: "a:2379", LOCK_TOKEN_FLOOR: "-1", PORT: "x" });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain("ETCD_ENDPOINTS");
    expect(message).toContain("LOCK_TOKEN_FLOOR");
    expect(message).toContain("PORT");
  });

  it("requires the store of the chosen backend", () => {
    expect(() => readConfig({})).toThrow(/LOCKDB_URL/);
    expect(() => readConfig({ LOCK_BACKEND: "etcd" })).toThrow(/ETCD_ENDPOINTS/);
    expect(() => readConfig({ LOCK_BACKEND: "zookeeper", LOCKDB_URL: "x" })).toThrow(/LOCK_BACKEND/);
  });
});
