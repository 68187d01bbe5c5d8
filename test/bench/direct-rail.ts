/**
 * B0 direct rail: `SubmitPayment` straight to a rail stub, no fence at all (the unsafe baseline
 * the ADR replaces). Its own stub and ledger, so that no mesh's checker sees these payments.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectClient } from "../../tools/harness/clients.js";
import type { PostgresServer } from "../../tools/harness/postgres.js";
import { ServiceProcess } from "../../tools/harness/service-process.js";
import { RailService } from "../../services/shared/gen/railfence/rail/v1/rail_pb.js";
import { closedLoop, type PointResult } from "./load.js";

/** One closed-loop point per concurrency against a fresh stub on database `database` of server. */
export async function directRail(
  server: PostgresServer,
  database: string,
  concurrencies: number[],
  timing: { seconds: number; warmup: number },
  reasonOf: (err: unknown) => string,
): Promise<Array<{ concurrency: number; result: PointResult }>> {
  const dir = mkdtempSync(join(tmpdir(), "railfence-bench-direct-"));
  const credential = `rk_${randomBytes(24).toString("hex")}`;
  const credentialFile = join(dir, "rail-credential");
  writeFileSync(credentialFile, `${credential}\n`, { mode: 0o600 });
  const stub = new ServiceProcess({
    service: "rail-stub",
    name: `rail-stub-${database}`,
    env: { PORT: "0", METRICS_PORT: "0", RAILDB_URL: await server.createDatabase(database), RAIL_CREDENTIALS_FILE: credentialFile },
  });
  try {
    await stub.start();
    const rail = connectClient(RailService, stub.url);
    const auth = { authorization: `Bearer ${credential}` };
    const out = [];
    for (const c of concurrencies) {
      const result = await closedLoop(
        c,
        timing.seconds,
        timing.warmup,
        async () => {
          await rail.submitPayment(
            { clientReference: `direct-${randomUUID()}`, accountId: "acc-direct", beneficiary: "ben-1", amount: { amountMinor: 1050n, currency: "EUR" } },
            { headers: auth },
          );
        },
        reasonOf,
      );
      out.push({ concurrency: c, result });
    }
    return out;
  } finally {
    await stub.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
