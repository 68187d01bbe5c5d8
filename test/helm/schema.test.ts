/**
 * values.schema.json: fencing and the other guards cannot be turned off, the proxy cannot drop
 * below two replicas, timing that defeats the guarantee is refused, database URLs carry no
 * credentials, and unknown keys are refused everywhere (no free-form env to smuggle a flag through).
 */
import { describe, expect, it } from "vitest";
import { helm } from "./helm-tool.js";
import { templateArgs } from "./render.js";

function template(...set: string[]) {
  return helm(templateArgs({ set }));
}

describe("values.schema.json", () => {
  it.each([
    ["railProxy.fencingEnabled=false", "fencingEnabled"],
    ["railProxy.env.RAIL_PROXY_FENCING_ENABLED=false", "env"],
    ["railProxy.extraEnv[0].name=RAIL_PROXY_FENCING_ENABLED", "extraEnv"],
    ["executor.env.X=1", "env"],
    ["railProxy.replicas=1", "railProxy.replicas"],
    ["railProxy.hpa.minReplicas=1", "railProxy.hpa.minReplicas"],
    ["railProxy.pdb.minAvailable=0", "railProxy.pdb.minAvailable"],
    ["noSuchKey=1", "noSuchKey"],
    ["railProxy.resources.requests.gpu=1", "gpu"],
    ["networkPolicy.otlp.protocol=grpc", "protocol"],
    ["lock.backend=memory", "lock.backend"],
    ["database.paydb.url=postgresql://railfence:hunter2@db:5432/paydb", "database.paydb.url"],
    ["rail.egress.cidrs=null", "cidrs"],
    ["payouts.limits.accountDailyAmount=EUR=10.5", "accountDailyAmount"],
    ["payouts.limits.timeoutMs=0", "timeoutMs"],
    // Below the 24 h floor the payouts service refuses to start; the chart says so first.
    ["payouts.idempotencyRetentionMs=3600000", "idempotencyRetentionMs"],
    // Harness-only switches (negative controls): no value can reach RAIL_PROXY_DISABLED_GUARDS,
    // RAIL_PROXY_MARK_STORE or RAIL_PROXY_FENCING_ENABLED.
    ["railProxy.disabledGuards=payout-binding", "disabledGuards"],
    ["railProxy.markStore=memory", "markStore"],
    ["railProxy.guards.oneLive=false", "guards"],
    ["railProxy.env.RAIL_PROXY_DISABLED_GUARDS=forward-budget", "env"],
    ["railProxy.extraEnv[0].name=RAIL_PROXY_MARK_STORE", "extraEnv"],
    ["railProxy.envFrom[0].configMapRef.name=guards-off", "envFrom"],
    ["reconciler.env.RAIL_PROXY_DISABLED_GUARDS=one-live", "env"],
    ["env.RAIL_PROXY_FENCING_ENABLED=false", "env"],
    // Timing that makes the guarantee impossible (the cross-field rules are in validate.yaml).
    ["railProxy.ambiguityMarginMs=0", "railProxy.ambiguityMarginMs"],
    ["railProxy.forwardBudgetMs=0", "railProxy.forwardBudgetMs"],
    ["reconciler.settlementWindowMs=0", "reconciler.settlementWindowMs"],
    ["reconciler.contradictionWatchMs=0", "reconciler.contradictionWatchMs"],
    ["reconciler.unrecordedPaymentWatchMs=0", "reconciler.unrecordedPaymentWatchMs"],
    // Database URLs carry neither user nor password; users are role names.
    ["database.paydb.url=postgresql://railfence@db:5432/paydb", "database.paydb.url"],
    ["database.lockdb.url=postgresql://db:5432/lockdb?user=railfence", "database.lockdb.url"],
    ["database.lockdb.url=postgresql://db:5432/lockdb?sslmode=require&password=hunter2", "database.lockdb.url"],
    ["database.raildb.url=postgresql://stub@db/raildb", "database.raildb.url"],
    ["database.paydb.existingSecret=shared", "existingSecret"],
    ["database.paydb.credentials.auditor.user=Auditor", "database.paydb.credentials.auditor.user"],
    ["database.paydb.credentials.metrics.user=x", "metrics"],
    ["database.paydb.credentials.executor.user=Executor", "database.paydb.credentials.executor.user"],
    ["database.paydb.credentials.executor.user=exec-login", "database.paydb.credentials.executor.user"],
    ["database.paydb.credentials.executor.user=x\\;DROP ROLE y", "database.paydb.credentials.executor.user"],
    ["database.lockdb.credentials.lock.passwordKey=../token", "database.lockdb.credentials.lock.passwordKey"],
  ])("rejects --set %s", (set, mentions) => {
    const r = template(set);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("values don't meet the specifications of the schema");
    expect(r.stderr).toContain(mentions);
  });

  it("accepts the same keys with allowed values (negative control)", () => {
    const r = template(
      "railProxy.replicas=3",
      "railProxy.hpa.minReplicas=2",
      "lock.backend=pg",
      "railProxy.resources.requests.cpu=500m",
      "payouts.limits.accountDailyAmount=EUR=500\\,*=off",
      "payouts.idempotencyRetentionMs=86400000",
    );
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(r.stdout).toContain("replicas: 3");
    expect(r.stdout).toMatch(/name: LIMIT_ACCOUNT_DAILY_AMOUNT\s+value: "EUR=500,\*=off"/);
  });

  it("accepts the timing and database keys with allowed values (negative control)", () => {
    const r = template(
      "railProxy.ambiguityMarginMs=1000",
      "railProxy.forwardBudgetMs=500",
      "reconciler.settlementWindowMs=60000",
      "reconciler.contradictionWatchMs=86400000",
      "reconciler.unrecordedPaymentWatchMs=86400000",
      "database.paydb.url=postgresql://db.example:5432/paydb?sslmode=verify-full",
      "database.paydb.credentials.executor.user=_exec_login_2",
      "database.paydb.credentials.auditor.user=x",
      "database.lockdb.credentials.lock.passwordKey=lock.password",
    );
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(r.stdout).toContain("postgresql://_exec_login_2@db.example:5432/paydb?sslmode=verify-full");
  });

  it("closes every object in the schema (additionalProperties: false)", async () => {
    const { readFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    const { chartDir } = await import("./helm-tool.js");
    const schema = JSON.parse(readFileSync(join(chartDir, "values.schema.json"), "utf8"));
    const open: string[] = [];
    const walk = (node: any, path: string) => {
      if (node === null || typeof node !== "object") return;
      if (node.type === "object" && node.properties && node.additionalProperties !== false) open.push(path);
      // Maps (labels, annotations) are objects without properties whose values must be strings.
      if (node.type === "object" && !node.properties && node.additionalProperties?.type !== "string") open.push(`${path} (map)`);
      for (const [k, v] of Object.entries(node)) walk(v, `${path}/${k}`);
    };
    walk(schema, "#");
    expect(open).toEqual([]);
  });
});
