import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { LIMITS } from "../domain/limits.js";
import { projectRoot } from "../process/project-root.js";
import { RPC_DURATION_BUCKETS, rpcCodeName, rpcCodeOf, unknownPathLabels } from "./rpc-metrics.js";

/**
 * The configured waits an RPC can run into, read from every service's config schema
 * (`NAME: env.ms(default, min, max)`): the ceiling, in seconds, of each one found.
 */
const DEADLINE_SETTINGS = ["RAIL_DEADLINE_MS", "CALL_TIMEOUT_MS", "LOCK_WAIT_MS", "LOCK_BACKEND_TIMEOUT_MS", "LIMITS_TIMEOUT_MS", "LIMITS_LOCK_WAIT_MS"];

function configuredCeilings(): Map<string, number> {
  const out = new Map<string, number>();
  const services = join(projectRoot(), "services");
  for (const dir of readdirSync(services)) {
    let text: string;
    try {
      text = readFileSync(join(services, dir, "config.ts"), "utf8");
    } catch {
      continue;
    }
    for (const m of text.matchAll(/\b([A-Z_]+_MS): env\.ms\(([\d_]+), ([\d_]+), ([\d_]+)\)/g)) {
      if (!DEADLINE_SETTINGS.includes(m[1]!)) continue;
      const seconds = Number(m[4]!.replaceAll("_", "")) / 1000;
      out.set(`${dir}/${m[1]}`, Math.max(out.get(`${dir}/${m[1]}`) ?? 0, seconds));
    }
  }
  return out;
}

/** The deadlines (name -> seconds) longer than the largest finite bucket. */
function uncovered(buckets: readonly number[], deadlines: Map<string, number>): string[] {
  const top = Math.max(...buckets);
  return [...deadlines].filter(([, s]) => s > top).map(([name, s]) => `${name} (${s} s)`);
}

describe("rpc_code", () => {
  it("is ok for success and the Connect name of every code, lower snake case, each distinct", () => {
    expect(rpcCodeName(0)).toBe("ok");
    const codes = Object.values(Code).filter((v): v is Code => typeof v === "number");
    expect(codes).toHaveLength(16);
    const names = codes.map(rpcCodeName);
    for (const n of names) expect(n).toMatch(/^[a-z]+(_[a-z]+)*$/);
    expect(new Set(names).size).toBe(16);
    expect(names).not.toContain("ok");
    expect(rpcCodeName(Code.Canceled)).toBe("canceled");
    expect(rpcCodeName(Code.InvalidArgument)).toBe("invalid_argument");
    expect(rpcCodeName(Code.DeadlineExceeded)).toBe("deadline_exceeded");
    expect(rpcCodeName(Code.Unavailable)).toBe("unavailable");
    expect(rpcCodeName(Code.PermissionDenied)).toBe("permission_denied");
  });

  it("of a thrown value is its Connect code; anything that is not a ConnectError reads unknown, never ok", () => {
    expect(rpcCodeOf(new Error("boom"))).toBe("unknown");
    expect(rpcCodeOf("a string")).toBe("unknown");
    expect(rpcCodeName(99 as Code)).toBe("unknown");
  });
});

describe("labels of a path no handler serves", () => {
  const known = new Set(["railfence.lock.v1.LockService"]);
  it("keep a known service's name but never the client's method text", () => {
    expect(unknownPathLabels("/railfence.lock.v1.LockService/DropTable", known)).toEqual({ service: "railfence.lock.v1.LockService", method: "unknown" });
  });
  it("are unknown/unknown for a service this server does not serve", () => {
    expect(unknownPathLabels("/evil.Service/Method", known)).toEqual({ service: "unknown", method: "unknown" });
    expect(unknownPathLabels("/", known)).toEqual({ service: "unknown", method: "unknown" });
  });
});

describe("the duration buckets", () => {
  const deadlines = configuredCeilings();

  it("find every deadline setting they must cover in the config schemas", () => {
    const found = new Set([...deadlines.keys()].map((k) => k.split("/")[1]));
    expect([...found].sort()).toEqual([...DEADLINE_SETTINGS].sort());
  });

  it("reach the longest configured deadline, the longest deadline a server accepts and its own call bound", () => {
    deadlines.set("LIMITS.maxTimeoutMs", LIMITS.maxTimeoutMs / 1000);
    deadlines.set("LIMITS.maxCallMs", LIMITS.maxCallMs / 1000);
    expect(Math.max(...deadlines.values())).toBeGreaterThan(1);
    expect(uncovered(RPC_DURATION_BUCKETS, deadlines)).toEqual([]);
  });

  it("negative control: buckets that stop at 1 s are caught", () => {
    expect(uncovered([0.005, 0.01, 0.1, 0.5, 1], deadlines)).toContain("rail-proxy/RAIL_DEADLINE_MS (120 s)");
  });

  it("are sorted and start in the milliseconds", () => {
    expect([...RPC_DURATION_BUCKETS].sort((a, b) => a - b)).toEqual([...RPC_DURATION_BUCKETS]);
    expect(RPC_DURATION_BUCKETS[0]).toBeLessThanOrEqual(0.005);
  });
});
