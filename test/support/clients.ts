/**
 * Connect clients and assertions shared by the cross-process tests. Every client a test makes
 * comes from one module, tools/harness/clients.ts (connectClient: by service, protocol, TLS
 * identity; ClientPool: clients whose sessions a test closes at once), re-exported here; the
 * helpers below are shorthands over it.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { expect } from "vitest";
import pg from "pg";
import { errorInfo } from "../../services/shared/domain/errors.js";
import { RailProxyService } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { RailControlService, FaultKind } from "../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { connectClient } from "../../tools/harness/clients.js";
import type { Mesh } from "../../tools/harness/mesh.js";

export { FaultKind };
export { ClientPool, connectClient, PROTOCOLS, tlsNodeOptions, type ClientOptions, type ClientTls, type Protocol } from "../../tools/harness/clients.js";

/** A rail-proxy client over h2c (the tests' meshes run without TLS unless they say so). */
export function proxyClient(url: string) {
  return connectClient(RailProxyService, url);
}

/** The rail-stub's fault-control API on an h2c mesh. */
export function railControl(mesh: Mesh) {
  const port = mesh.railStub.ready?.controlPort;
  if (!port) throw new Error("rail-stub has no control port");
  return connectClient(RailControlService, `http://127.0.0.1:${port}`);
}

/** Awaits a call that must fail with code + ErrorInfo reason; returns the error. */
export async function expectRejected(call: Promise<unknown>, code: Code, reason?: string): Promise<ConnectError> {
  let caught: unknown;
  try {
    await call;
  } catch (err) {
    caught = err;
  }
  expect(caught, "call should have failed").toBeDefined();
  const ce = ConnectError.from(caught);
  expect(Code[ce.code], ce.message).toBe(Code[code]);
  if (reason !== undefined) {
    const info = errorInfo(ce);
    expect(info?.reason).toBe(reason);
    expect(info?.domain).toBe("railfence.dev");
  }
  return ce;
}

/** A pg client on one of the mesh's databases, closed by the caller. */
export async function db(url: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  return c;
}

/** How many times the rail booked a client reference (its own ledger: the INV-02 truth). */
export async function railBookings(raildb: pg.Client, clientReference: string): Promise<number> {
  const { rows } = await raildb.query<{ n: string }>("SELECT count(*) AS n FROM payments WHERE client_reference = $1 AND status = 'ACCEPTED'", [
    clientReference,
  ]);
  return Number(rows[0]!.n);
}

/** Scrapes one metric value from a /metrics endpoint (first sample matching name and labels). */
export async function metricValue(metricsPort: number, name: string, labels = ""): Promise<number | undefined> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    const [key, value] = line.split(" ");
    if (!key || value === undefined) continue;
    const bare = key.replace(/\{.*\}$/, "");
    if (bare === name && (labels === "" || key.includes(labels))) return Number(value);
  }
  return undefined;
}

/** The one polling helper lives in time.ts; re-exported here, where most tests import it from. */
export { eventually } from "./time.js";
