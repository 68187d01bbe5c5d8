/**
 * Fixtures for the payouts API tests: a fresh migrated paydb per test file on the run's shared
 * PostgreSQL, real `payouts` processes, gRPC (binary) and Connect (JSON) clients whose HTTP/2
 * sessions are closed by the test, and small readers for paydb rows and /metrics.
 */
import { ConnectError, type Client } from "@connectrpc/connect";
import { randomUUID } from "node:crypto";
import http2 from "node:http2";
import pg from "pg";
import { afterAll, beforeAll, inject } from "vitest";
import { ServiceProcess } from "../../tools/harness/service-process.js";
import { migrate } from "../../services/shared/db/migrate.js";
import { errorInfo } from "../../services/shared/domain/errors.js";
import { PayoutService, type CreatePayoutRequest, type CreatePayoutResponse } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { ClientPool } from "../support/clients.js";
import { uniqueSuffix } from "../support/test-mesh.js";

export type PayoutClient = Client<typeof PayoutService>;
/** A CreatePayout body as plain data (the clients accept it as a message init). */
export interface CreateInit {
  accountId?: string;
  amount?: { amountMinor: bigint; currency: string };
  beneficiary?: string;
  clientReference?: string;
}

/** Creates and migrates a paydb unique to the caller on adminUrl's server (the shared one by default). */
export async function createPaydb(adminUrl: string = inject("pgUrl")): Promise<string> {
  const base = adminUrl.replace(/\/[^/]*$/, "");
  const name = `paydb_payouts${uniqueSuffix()}`;
  const c = new pg.Client({ connectionString: `${base}/postgres` });
  await c.connect();
  try {
    await c.query(`CREATE DATABASE ${name}`);
  } finally {
    await c.end();
  }
  const url = `${base}/${name}`;
  await migrate(url, "paydb");
  return url;
}

/** Drops a database made by createPaydb (best effort: the server may already be gone). */
export async function dropPaydb(url: string): Promise<void> {
  const name = url.slice(url.lastIndexOf("/") + 1);
  const c = new pg.Client({ connectionString: url.replace(/\/[^/]*$/, "/postgres") });
  try {
    await c.connect();
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } catch {
    // the server is stopped or the database is in use: the run's server is discarded anyway
  } finally {
    await c.end().catch(() => {});
  }
}

/** A real payouts process on dynamic ports. */
export async function startPayouts(paydbUrl: string, env: Record<string, string> = {}, name = "payouts"): Promise<ServiceProcess> {
  const proc = new ServiceProcess({
    service: "payouts",
    name,
    env: { PORT: "0", METRICS_PORT: "0", PAYDB_URL: paydbUrl, LOG_LEVEL: "info", DRAIN_MS: "2000", ...env },
  });
  await proc.start();
  return proc;
}

/** Clients over both encodings, sharing nothing with each other; close() ends their sessions. */
export function clients(baseUrl: string): { grpc: PayoutClient; json: PayoutClient; close(): void } {
  const pool = new ClientPool();
  return { grpc: pool.client(PayoutService, baseUrl, "grpc"), json: pool.client(PayoutService, baseUrl, "connect-json"), close: () => pool.close() };
}

export interface CallResult {
  response?: CreatePayoutResponse;
  error?: ConnectError;
  reason: string;
  replayed: boolean;
  headers: Headers;
}

/** CreatePayout that returns failures instead of throwing, with the response headers. */
export async function create(client: PayoutClient, req: CreateInit, key: string | undefined, extraHeaders: Record<string, string> = {}): Promise<CallResult> {
  let headers = new Headers();
  const h: Record<string, string> = { ...extraHeaders };
  if (key !== undefined) h["idempotency-key"] = key;
  try {
    const response = await client.createPayout(req, { headers: h, onHeader: (hd) => (headers = hd) });
    return { response, reason: "", replayed: headers.get("idempotency-replayed") === "true", headers };
  } catch (err) {
    const ce = ConnectError.from(err);
    return { error: ce, reason: errorInfo(ce)?.reason ?? "", replayed: false, headers: ce.metadata };
  }
}

export function newKey(): string {
  return randomUUID();
}

let seq = 0;
/** A valid request; every call differs (amount), so bodies never collide by accident. */
export function validRequest(overrides: Partial<CreateInit> = {}): CreateInit {
  seq += 1;
  return {
    accountId: "acct-1",
    amount: { amountMinor: 1000n + BigInt(seq), currency: "EUR" },
    beneficiary: "iban:DE89370400440532013000",
    clientReference: `order-${seq}`,
    ...overrides,
  };
}

/** One query against paydb on a short-lived connection. */
export async function sql<R extends pg.QueryResultRow = Record<string, unknown>>(url: string, text: string, params: unknown[] = []): Promise<R[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<R>(text, params)).rows;
  } finally {
    await c.end();
  }
}

export async function countPayouts(url: string, where = "true", params: unknown[] = []): Promise<number> {
  const rows = await sql<{ n: string }>(url, `SELECT count(*) AS n FROM payouts WHERE ${where}`, params);
  return Number(rows[0]!.n);
}

export async function keyRow(url: string, key: string): Promise<Record<string, unknown> | undefined> {
  return (await sql(url, "SELECT * FROM idempotency_keys WHERE idempotency_key = $1", [key]))[0];
}

/**
 * A CreatePayout with this key is in progress and held (by a lock the test holds): its
 * IN_PROGRESS marker is visible (the stepwise path commits it first), or its statement waits on a
 * lock (the one-statement path, whose work no other session sees before it commits).
 */
export async function requestHeld(url: string, key: string): Promise<boolean> {
  if ((await keyRow(url, key))?.state === "IN_PROGRESS") return true;
  const waiting = await sql(
    url,
    "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%create_payout(%'",
  );
  return waiting.length > 0;
}

/** Reads one unlabelled counter (or the sum over its series) from /metrics. */
export async function metric(metricsPort: number, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  let total = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) total += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return total;
}

export { eventually } from "../support/clients.js";

/**
 * A raw Connect JSON call over h2c, exactly what `curl --http2-prior-knowledge` sends: the
 * body is the caller's own JSON text (field order, explicit defaults), not a client's.
 */
export function postJson(
  baseUrl: string,
  method: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: http2.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(baseUrl);
    session.on("error", reject);
    const req = session.request({
      ":method": "POST",
      ":path": `/railfence.payouts.v1.PayoutService/${method}`,
      "content-type": "application/json",
      ...headers,
    });
    let status = 0;
    let resHeaders: http2.IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    req.on("response", (h) => {
      status = Number(h[":status"]);
      resHeaders = h;
    });
    req.on("data", (d: Buffer) => chunks.push(d));
    req.on("end", () => {
      session.close();
      resolve({ status, headers: resHeaders, body: Buffer.concat(chunks).toString("utf8") });
    });
    req.on("error", (e) => {
      session.destroy();
      reject(e);
    });
    req.end(body);
  });
}

export type { CreatePayoutRequest };

/** One payouts service on a fresh paydb for the whole file, stopped and dropped afterwards. */
export function usePayoutsService(): { readonly paydb: string; readonly svc: ServiceProcess; readonly c: ReturnType<typeof clients> } {
  const state = {} as { paydb: string; svc: ServiceProcess; c: ReturnType<typeof clients> };
  beforeAll(async () => {
    state.paydb = await createPaydb();
    state.svc = await startPayouts(state.paydb);
    state.c = clients(state.svc.url);
  });
  afterAll(async () => {
    state.c?.close();
    await state.svc?.stop(5000);
    if (state.paydb) await dropPaydb(state.paydb);
  });
  return state;
}
