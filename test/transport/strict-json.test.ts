/**
 * Connect JSON refuses a key that names no field (decision 050). A typo'd `clientRefrence` used
 * to be dropped: the payout was created without its client reference. Over the mesh's mutual
 * TLS, as a client's curl sends it, the typo is now invalid_argument (HTTP 400) with reason
 * UNKNOWN_FIELD naming the key, and no payout exists; the same body spelled right creates one
 * (the positive control). Every railfence server refuses the same way, before its handler.
 */
import http2 from "node:http2";
import { fromBinary } from "@bufbuild/protobuf";
import { beforeAll, describe, expect, it } from "vitest";
import { useMesh } from "../support/use-mesh.js";
import type { MeshIdentity } from "../../tools/harness/pki.js";
import { ErrorInfoSchema } from "../../services/shared/gen/google/rpc/error_details_pb.js";
import { tlsNodeOptions } from "../support/clients.js";
import { countPayouts, newKey } from "../payouts/support.js";

const t = useMesh({ tls: true, proxies: 1 });

beforeAll(async () => {
  await t.mesh.startLock();
  await t.mesh.startPayouts();
});

interface RawAnswer {
  status: number;
  body: string;
}

/** One Connect JSON POST over mutual TLS as identity: exactly what curl with a client certificate sends. */
function postJson(baseUrl: string, path: string, body: string, headers: Record<string, string> = {}, identity: MeshIdentity = "client"): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(baseUrl, tlsNodeOptions(t.mesh.identityFiles(identity)));
    session.on("error", reject);
    const req = session.request({ ":method": "POST", ":path": path, "content-type": "application/json", ...headers });
    let status = 0;
    const chunks: Buffer[] = [];
    req.on("response", (h) => {
      status = Number(h[":status"]);
    });
    req.on("data", (d: Buffer) => chunks.push(d));
    req.on("end", () => {
      session.close();
      resolve({ status, body: Buffer.concat(chunks).toString("utf8") });
    });
    req.on("error", (e) => {
      session.destroy();
      reject(e);
    });
    req.end(body);
  });
}

/** The code and ErrorInfo of a Connect JSON error body (each detail's value is base64 protobuf). */
function errorInfoOf(body: string): { code: string; reason?: string; field?: string } {
  const err = JSON.parse(body) as { code: string; details?: { type: string; value: string }[] };
  const detail = err.details?.find((d) => d.type === "google.rpc.ErrorInfo");
  const info = detail ? fromBinary(ErrorInfoSchema, Buffer.from(detail.value, "base64")) : undefined;
  return { code: err.code, reason: info?.reason, field: info?.metadata.field };
}

const CREATE = "/railfence.payouts.v1.PayoutService/CreatePayout";

describe("strict Connect JSON (decision 050)", () => {
  it("CreatePayout with a typo'd clientRefrence is refused, names the key, and creates nothing; spelled right it creates the payout", async () => {
    const paydb = t.mesh.dbUrl("paydb");
    const typo = `{"accountId":"acct-strict","amount":{"amountMinor":"1250","currency":"EUR"},"beneficiary":"ben-strict","clientRefrence":"order-77"}`;
    const refused = await postJson(t.mesh.payouts!.url, CREATE, typo, { "idempotency-key": newKey() });
    expect(refused.status, refused.body).toBe(400);
    expect(errorInfoOf(refused.body)).toEqual({ code: "invalid_argument", reason: "UNKNOWN_FIELD", field: "clientRefrence" });
    expect(JSON.parse(refused.body).message).toContain("clientRefrence");
    expect(await countPayouts(paydb, "account_id = 'acct-strict'")).toBe(0);

    // Positive control: the same body with the field spelled right is served, reference kept.
    const right = typo.replace("clientRefrence", "clientReference");
    const created = await postJson(t.mesh.payouts!.url, CREATE, right, { "idempotency-key": newKey() });
    expect(created.status, created.body).toBe(200);
    expect(JSON.parse(created.body).payout).toMatchObject({ accountId: "acct-strict", clientReference: "order-77" });
    expect(await countPayouts(paydb, "account_id = 'acct-strict' AND client_reference = 'order-77'")).toBe(1);
  });

  it("a typo inside a nested message is refused with its path", async () => {
    const body = `{"accountId":"acct-strict2","amount":{"amountMinr":"5","currency":"EUR"},"beneficiary":"b"}`;
    const refused = await postJson(t.mesh.payouts!.url, CREATE, body, { "idempotency-key": newKey() });
    expect(errorInfoOf(refused.body)).toEqual({ code: "invalid_argument", reason: "UNKNOWN_FIELD", field: "amount.amountMinr" });
    expect(await countPayouts(t.mesh.dbUrl("paydb"), "account_id = 'acct-strict2'")).toBe(0);
  });

  it("every railfence server refuses an unknown key the same way, and serves the body without it", async () => {
    const targets: { name: string; url: string; path: string; body: string; identity: MeshIdentity }[] = [
      { name: "lock", url: t.mesh.lock!.url, path: "/railfence.lock.v1.LockService/Inspect", body: `{"key":"account:strict"}`, identity: "operator" },
      {
        name: "rail-proxy",
        url: t.mesh.proxies[0]!.url,
        path: "/railfence.railproxy.v1.RailProxyService/GetSubmission",
        body: `{"payoutId":"p-strict"}`,
        identity: "operator",
      },
      {
        name: "rail-stub control",
        url: t.mesh.railControlUrl,
        path: "/railfence.railcontrol.v1.RailControlService/SetFaults",
        body: "{}",
        identity: "operator",
      },
      { name: "rail-stub", url: t.mesh.railStub.url, path: "/railfence.rail.v1.RailService/ListPayments", body: "{}", identity: "rail-proxy" },
      { name: "health", url: t.mesh.payouts!.url, path: "/grpc.health.v1.Health/Check", body: `{"service":""}`, identity: "client" },
    ];
    for (const t of targets) {
      const typo = `${t.body.slice(0, -1)}${t.body === "{}" ? "" : ","}"sinceTypo":"x"}`;
      const refused = await postJson(t.url, t.path, typo, {}, t.identity);
      expect(refused.status, `${t.name}: ${refused.body}`).toBe(400);
      expect(errorInfoOf(refused.body), t.name).toEqual({ code: "invalid_argument", reason: "UNKNOWN_FIELD", field: "sinceTypo" });
      // Control: without the unknown key, the call is not refused for its body.
      const served = await postJson(t.url, t.path, t.body, {}, t.identity);
      expect(errorInfoOf(served.body.startsWith('{"code"') ? served.body : '{"code":"ok"}').reason, `${t.name}: ${served.body}`).not.toBe("UNKNOWN_FIELD");
    }
  });
});
