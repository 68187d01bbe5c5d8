/**
 * The library's transport against a real payouts process: mutual TLS (a configured client
 * identity is served; no certificate or a foreign identity is refused, the latter as a final
 * PERMISSION_DENIED), and OpenTelemetry propagation (the payout joins the caller's trace).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import { trace } from "@opentelemetry/api";
import { node as otelNode } from "@opentelemetry/sdk-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Pki } from "../../tools/harness/pki.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { createRailfenceClient, RailfenceError, tlsFromFiles } from "../../clients/typescript/src/index.js";
import { countPayouts, createPaydb, dropPaydb, sql, startPayouts } from "../payouts/support.js";

let paydb: string;
let pkiDir: string;
let pki: Pki;
let tlsPayouts: ServiceProcess;
let plainPayouts: ServiceProcess;

beforeAll(async () => {
  paydb = await createPaydb();
  pkiDir = mkdtempSync(join(tmpdir(), "railfence-client-pki-"));
  pki = await Pki.create(pkiDir);
  const server = await pki.issue("payouts");
  tlsPayouts = await startPayouts(paydb, { ...Pki.env(server), PAYOUTS_CLIENT_IDENTITIES: "client" }, "payouts-tls");
  tlsPayouts.opts.tls = true;
  plainPayouts = await startPayouts(paydb, {}, "payouts-h2c");
});

afterAll(async () => {
  await tlsPayouts?.stop(5000);
  await plainPayouts?.stop(5000);
  if (paydb) await dropPaydb(paydb);
  if (pkiDir) rmSync(pkiDir, { recursive: true, force: true });
});

const body = (accountId: string) => ({ accountId, amount: { amountMinor: 700n, currency: "EUR" }, beneficiary: "ben-tls" });

describe("mutual TLS", () => {
  it("a client with a configured identity's certificate creates payouts", async () => {
    const files = await pki.issue("client");
    const rf = createRailfenceClient({ payoutsUrl: tlsPayouts.url, tls: tlsFromFiles({ certFile: files.cert, keyFile: files.key, caFile: files.ca }) });
    try {
      const r = await rf.payouts.create(body("acct-tls"));
      expect(r.payout.accountId).toBe("acct-tls");
    } finally {
      rf.close();
    }
  });

  it("another identity is refused with a final PERMISSION_DENIED; no certificate at all never gets in", async () => {
    const rail = await pki.issue("rail");
    const wrong = createRailfenceClient({ payoutsUrl: tlsPayouts.url, tls: tlsFromFiles({ certFile: rail.cert, keyFile: rail.key, caFile: rail.ca }) });
    const none = createRailfenceClient({
      payoutsUrl: tlsPayouts.url,
      tls: tlsFromFiles({ caFile: pki.caCert }),
      deadlineMs: 2000,
      retry: { baseDelayMs: 10, maxDelayMs: 50 },
    });
    try {
      const denied = await wrong.payouts.create(body("acct-tls-denied")).then(
        () => undefined as never,
        (e: unknown) => e as RailfenceError,
      );
      expect(denied).toMatchObject({ code: Code.PermissionDenied, reason: "PERMISSION_DENIED", attempts: 1, transient: false });
      // No client certificate: the server's TLS refuses the handshake (alert "certificate
      // required"). A configuration failure: final after one attempt, and it says so.
      const anonymous = await none.payouts.create(body("acct-tls-denied")).then(
        () => undefined as never,
        (e: unknown) => e as RailfenceError,
      );
      expect(anonymous).toBeInstanceOf(RailfenceError);
      expect(anonymous).toMatchObject({ outcome: "configuration", attempts: 1, transient: false, reason: "" });
      expect(anonymous.message).toMatch(/^client configuration: .*certificate required.*not retried/);
      // A CA that did not sign the server's certificate: the same verdict, from this side of the handshake.
      const otherCa = await Pki.create(join(pkiDir, "other"), "another-ca");
      const client = await pki.issue("client");
      const wrongCa = createRailfenceClient({
        payoutsUrl: tlsPayouts.url,
        tls: tlsFromFiles({ certFile: client.cert, keyFile: client.key, caFile: otherCa.caCert }),
        deadlineMs: 2000,
        retry: { baseDelayMs: 10, maxDelayMs: 50 },
      });
      try {
        const distrusted = await wrongCa.payouts.create(body("acct-tls-denied")).then(
          () => undefined as never,
          (e: unknown) => e as RailfenceError,
        );
        expect(distrusted).toMatchObject({ outcome: "configuration", attempts: 1, transient: false });
        expect(distrusted.message).toMatch(/self-signed certificate in certificate chain/);
      } finally {
        wrongCa.close();
      }
      expect(await countPayouts(paydb, "account_id = 'acct-tls-denied'")).toBe(0);
    } finally {
      wrong.close();
      none.close();
    }
  });
});

describe("OpenTelemetry propagation", () => {
  it("carries the caller's trace context: the payout row records a traceparent of the caller's trace", async () => {
    const provider = new otelNode.NodeTracerProvider();
    provider.register();
    const rf = createRailfenceClient({ payoutsUrl: plainPayouts.url });
    try {
      const traceId = await trace.getTracer("test").startActiveSpan("checkout", async (span) => {
        try {
          const r = await rf.payouts.create(body("acct-traced"));
          const [row] = await sql<{ traceparent: string | null }>(paydb, "SELECT traceparent FROM payouts WHERE payout_id = $1", [r.payout.payoutId]);
          expect(row!.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
          expect(row!.traceparent!.split("-")[1]).toBe(span.spanContext().traceId);
          return span.spanContext().traceId;
        } finally {
          span.end();
        }
      });
      expect(traceId).toMatch(/^[0-9a-f]{32}$/);
      // Negative control: with tracing off in the library, nothing is propagated.
      const quiet = createRailfenceClient({ payoutsUrl: plainPayouts.url, tracing: false });
      try {
        await trace.getTracer("test").startActiveSpan("checkout-2", async (span) => {
          const r = await quiet.payouts.create(body("acct-untraced"));
          const [row] = await sql<{ traceparent: string | null }>(paydb, "SELECT traceparent FROM payouts WHERE payout_id = $1", [r.payout.payoutId]);
          expect(row!.traceparent?.split("-")[1]).not.toBe(span.spanContext().traceId);
          span.end();
        });
      } finally {
        quiet.close();
      }
    } finally {
      rf.close();
      await provider.shutdown();
    }
  });
});
