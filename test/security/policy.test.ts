/** The pure parts of identity and authorization: SAN parsing, policy lookup, loopback check. */
import { describe, expect, it } from "vitest";
import { allowedIdentities, POLICIES } from "../../services/shared/edge/authz.js";
import { LockService } from "../../services/shared/gen/railfence/lock/v1/lock_pb.js";
import { RailService } from "../../services/shared/gen/railfence/rail/v1/rail_pb.js";
import { RailProxyService } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { identityFromSan } from "../../services/shared/process/identity.js";
import { isLoopbackHost } from "../../services/shared/process/tls.js";

describe("identityFromSan", () => {
  it("takes the spiffe URI of the railfence trust domain before any DNS name", () => {
    expect(identityFromSan("DNS:localhost, URI:spiffe://railfence/executor, IP Address:127.0.0.1")).toBe("executor");
  });
  it("ignores other trust domains and malformed identities, falling back to a DNS SAN", () => {
    expect(identityFromSan("URI:spiffe://evil/executor, DNS:reconciler")).toBe("reconciler");
    expect(identityFromSan("URI:spiffe://railfence/a/b")).toBeUndefined();
    expect(identityFromSan("URI:spiffe://railfence/")).toBeUndefined();
    expect(identityFromSan(undefined)).toBeUndefined();
  });
});

describe("policy", () => {
  const proxy = "railfence.railproxy.v1.RailProxyService";
  it("matches the documented table", () => {
    expect(allowedIdentities(POLICIES.railProxy, proxy, "SubmitPayout")).toEqual(["executor"]);
    expect(allowedIdentities(POLICIES.railProxy, proxy, "ResolveSubmission")).toEqual(["reconciler", "operator"]);
    expect(allowedIdentities(POLICIES.lock, "railfence.lock.v1.LockService", "Inspect")).toEqual(["executor", "operator"]);
    expect(allowedIdentities(POLICIES.railStub, "railfence.rail.v1.RailService", "SubmitPayment")).toEqual(["rail-proxy"]);
    expect(allowedIdentities(POLICIES.payouts(["client"]), "railfence.payouts.v1.PayoutService", "CreatePayout")).toEqual(["client"]);
  });
  it("lets the auditor read the rail's statement and nothing else, on any server", () => {
    for (const m of RailProxyService.methods) {
      expect(allowedIdentities(POLICIES.railProxy, proxy, m.name).includes("auditor"), m.name).toBe(m.name === "GetRailStatement");
    }
    expect(allowedIdentities(POLICIES.railProxy, proxy, "GetRailStatement")).toEqual(["executor", "reconciler", "operator", "auditor"]);
    for (const m of LockService.methods) expect(allowedIdentities(POLICIES.lock, LockService.typeName, m.name), m.name).not.toContain("auditor");
    for (const m of RailService.methods) expect(allowedIdentities(POLICIES.railStub, RailService.typeName, m.name), m.name).not.toContain("auditor");
    // The payouts API's default identities (PAYOUTS_CLIENT_IDENTITIES: client,operator).
    expect(allowedIdentities(POLICIES.payouts(["client", "operator"]), "railfence.payouts.v1.PayoutService", "CreatePayout")).not.toContain("auditor");
  });

  it("denies by default: a method the policy does not name has nobody", () => {
    expect(allowedIdentities(POLICIES.railProxy, proxy, "SomethingNew")).toEqual([]);
    expect(allowedIdentities(POLICIES.lock, proxy, "SubmitPayout")).toEqual([]);
  });
});

describe("isLoopbackHost", () => {
  it("accepts loopback only", () => {
    for (const h of ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"]) expect(isLoopbackHost(h)).toBe(true);
    for (const h of ["0.0.0.0", "::", "10.0.0.1", "example.com", "128.0.0.1"]) expect(isLoopbackHost(h)).toBe(false);
  });
});
