import { describe, expect, it } from "vitest";
import { ConfigError } from "../shared/process/config.js";
import { readConfig } from "./config.js";

const base = {
  PAYDB_URL: "postgres://u@127.0.0.1:5432/paydb",
  LOCK_URL: "http://127.0.0.1:7100",
  RAIL_PROXY_URLS: "http://127.0.0.1:7200, http://127.0.0.1:7201",
};

describe("executor config", () => {
  it("applies the documented defaults and splits the proxy list", () => {
    const c = readConfig({ ...base, EXECUTOR_ID: "exec-1" });
    expect(c).toMatchObject({
      metricsPort: 9500,
      concurrency: 4,
      wake: "notify",
      pollIntervalMs: 200,
      leaseTtlMs: 5000,
      lockWaitMs: 1000,
      callTimeoutMs: 10_000,
      executorId: "exec-1",
    });
    expect(c.railProxyUrls).toEqual(["http://127.0.0.1:7200", "http://127.0.0.1:7201"]);
  });

  it("lists every problem at once", () => {
    let err: unknown;
    try {
      readConfig({
        LOCK_URL: "not a url",
        RAIL_PROXY_URLS: "ftp://x",
        EXECUTOR_CONCURRENCY: "0",
        EXECUTOR_ID: "bad id!",
        EXECUTOR_WAKE: "push",
        EXECUTOR_ANSWER: "some",
      });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const text = (err as ConfigError).problems.join("\n");
    for (const field of ["PAYDB_URL", "LOCK_URL", "RAIL_PROXY_URLS", "EXECUTOR_CONCURRENCY", "EXECUTOR_ID", "EXECUTOR_WAKE", "EXECUTOR_ANSWER"])
      expect(text).toContain(field);
  });
});
