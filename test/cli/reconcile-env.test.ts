/**
 * `railfence reconcile` starts the reconciler with an environment it writes itself
 * (cli/reconcile-command.ts); the reconciler owns the names (reconciler/config.ts). The CLI may
 * not import a service, so this test holds the two together: every variable the CLI sets is one
 * the reconciler reads, and the values it sets are accepted by the reconciler's own parser.
 */
import { describe, expect, it } from "vitest";
import { reconcilerEnv } from "../../services/cli/reconcile-command.js";
import { readConfig, RECONCILER_ENV_KEYS } from "../../services/reconciler/config.js";

const base = {
  paydb: "postgresql://u@127.0.0.1:5432/paydb",
  railProxies: ["http://127.0.0.1:7201", "http://127.0.0.1:7202"],
  tls: { cert: "/c.pem", key: "/k.pem", ca: "/ca.pem" },
};

/** Variables the CLI writes that the reconciler does not read. */
const unknownKeys = (env: Record<string, string>) => Object.keys(env).filter((k) => !RECONCILER_ENV_KEYS.includes(k));

describe("railfence reconcile -> reconciler environment", () => {
  it("sets only variables the reconciler reads", () => {
    expect(RECONCILER_ENV_KEYS).toContain("RECONCILER_DRY_RUN");
    const env = reconcilerEnv({ env: {}, ...base, dryRun: true, settlementWindowMs: 120_000 });
    expect(Object.keys(env).length).toBeGreaterThanOrEqual(8);
    expect(unknownKeys(env)).toEqual([]);
  });

  it("a renamed variable is caught (negative control)", () => {
    const env = reconcilerEnv({ env: {}, ...base, dryRun: false });
    expect(unknownKeys({ ...env, RECONCILE_DRY_RUN: "true" })).toEqual(["RECONCILE_DRY_RUN"]);
  });

  it("the reconciler's own parser accepts what the CLI sets, with the meaning the CLI intends", () => {
    const config = readConfig(reconcilerEnv({ env: {}, paydb: base.paydb, railProxies: base.railProxies, dryRun: true, settlementWindowMs: 120_000 }));
    expect(config).toMatchObject({ dryRun: true, intervalMs: 0, settlementWindowMs: 120_000, railProxyUrls: base.railProxies, metricsPort: 0 });
    expect(readConfig(reconcilerEnv({ env: { RECONCILER_DRY_RUN: "true" }, paydb: base.paydb, railProxies: base.railProxies, dryRun: false })).dryRun).toBe(
      false,
    );
  });
});
