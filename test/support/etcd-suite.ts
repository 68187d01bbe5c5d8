/**
 * Suites that need a real etcd. Without an etcd binary they are skipped on a developer's machine
 * (visibly), but where RAILFENCE_REQUIRE_ETCD=1 (.ci/run sets it) a missing binary is a failing
 * test: a skipped suite counts as green, and CI must not pass the etcd backend untested.
 */
import { describe, it } from "vitest";
import { etcdBinary } from "../../tools/harness/etcd.js";

export type EtcdSuitePlan = "run" | "fail" | "skip";

export function etcdSuitePlan(binary: string | undefined, env: NodeJS.ProcessEnv): EtcdSuitePlan {
  if (binary) return "run";
  return env.RAILFENCE_REQUIRE_ETCD === "1" ? "fail" : "skip";
}

export function describeWithEtcd(name: string, body: () => void): void {
  const plan = etcdSuitePlan(etcdBinary(), process.env);
  if (plan === "run") describe(name, body);
  else if (plan === "fail")
    describe(name, () =>
      it("needs an etcd binary (RAILFENCE_REQUIRE_ETCD=1: install etcd-server or set ETCD_BIN)", () => {
        throw new Error(`no etcd binary: "${name}" cannot run, and CI requires it`);
      }),
    );
  else describe.skip(`${name} (no etcd binary)`, body);
}
