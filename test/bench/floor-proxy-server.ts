/**
 * The design's floor (bench workload F): the rail-proxy's work per submission and nothing else.
 * A bare `node:http2` server decodes SubmitPayout, runs the proxy's own prepared admission
 * statement (`rail_admit`), forwards SubmitPayment once over one kept-warm bare `node:http2`
 * session with the rail credential, runs the proxy's outcome statement and answers. No TLS, no
 * validation, no request gate, no interceptors, no authorization, no metrics, no logs, no budget,
 * no error handling beyond failing the call: what is left is the two pg round trips, the served
 * and the made HTTP/2 call, and protobuf. Not a proxy anyone may run; a yardstick for how far the
 * real one is from what its protocol costs on this machine.
 *
 * Forked by floor-proxy.ts with argv [paydb url, rail url, rail credential, group size]; sends its
 * port. Group size > 1: the proxy's group admission and outcome writes (decision 068), as shipped;
 * 1: every statement alone (the floor before group admission).
 */
import http2 from "node:http2";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import pg from "pg";
import { createSubmissionStore } from "../../services/rail-proxy/submission-store.js";
import { SubmitPaymentRequestSchema, SubmitPaymentResponseSchema, PaymentStatus } from "../../services/shared/gen/railfence/rail/v1/rail_pb.js";
import { SubmissionState, SubmitPayoutRequestSchema, SubmitPayoutResponseSchema } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";

const [paydbUrl, railUrl, credential, groupSize = "1"] = process.argv.slice(2) as [string, string, string, string?];
const pool = new pg.Pool({ connectionString: paydbUrl, max: 20 });
// The proxy's own store: the same prepared statements, called the same way (grouped as the proxy groups them).
const store = createSubmissionStore(pool, 60_000, undefined, { maxBatch: Number(groupSize), maxInFlight: 2 });
const rail = http2.connect(railUrl);

/** One message in gRPC framing (no compression). */
function frame(body: Uint8Array): Buffer {
  const out = Buffer.alloc(5 + body.length);
  out.writeUInt32BE(body.length, 1);
  out.set(body, 5);
  return out;
}

/** The message of a one-message gRPC body. */
const unframe = (chunks: Buffer[]) => Buffer.concat(chunks).subarray(5);

/** One unary call to the rail; resolves with the answer's message bytes when grpc-status is 0. */
function callRail(body: Uint8Array): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const stream = rail.request({
      ":method": "POST",
      ":path": "/railfence.rail.v1.RailService/SubmitPayment",
      "content-type": "application/grpc",
      te: "trailers",
      authorization: `Bearer ${credential}`,
    });
    const chunks: Buffer[] = [];
    let status: string | undefined;
    stream.on("response", (h) => (status = h["grpc-status"] as string | undefined));
    stream.on("trailers", (t) => (status = String(t["grpc-status"])));
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("end", () => (status === "0" ? resolve(unframe(chunks)) : reject(new Error(`rail grpc-status ${status}`))));
    stream.on("error", reject);
    stream.end(frame(body));
  });
}

/** The admission refused the submission (a stale token, a duplicate): nothing was forwarded. */
class Refused extends Error {}

async function submit(requestBytes: Buffer): Promise<Uint8Array> {
  const req = fromBinary(SubmitPayoutRequestSchema, requestBytes);
  const amount = req.amount!;
  const admitted = await store.admit({
    reference: req.payoutId,
    payoutId: req.payoutId,
    accountId: req.accountId,
    token: req.fencingToken,
    amountMinor: amount.amountMinor,
    currency: amount.currency,
    beneficiary: req.beneficiary,
    replicaId: "floor",
  });
  if (admitted.kind !== "ADMITTED") throw new Refused(admitted.kind);
  const answer = fromBinary(
    SubmitPaymentResponseSchema,
    await callRail(
      toBinary(
        SubmitPaymentRequestSchema,
        create(SubmitPaymentRequestSchema, { clientReference: req.payoutId, accountId: req.accountId, beneficiary: req.beneficiary, amount }),
      ),
    ),
  );
  const accepted = answer.status === PaymentStatus.ACCEPTED;
  await store.recordOutcome(req.payoutId, accepted ? "ACCEPTED" : "REJECTED", answer.railReference, answer.reason || null, null, 0);
  return toBinary(
    SubmitPayoutResponseSchema,
    create(SubmitPayoutResponseSchema, {
      submission: {
        payoutId: req.payoutId,
        accountId: req.accountId,
        fencingToken: req.fencingToken,
        amount,
        beneficiary: req.beneficiary,
        state: accepted ? SubmissionState.ACCEPTED : SubmissionState.REJECTED,
        railReference: answer.railReference,
        replicaId: "floor",
        boundPayoutId: req.payoutId,
      },
    }),
  );
}

const server = http2.createServer();
server.on("stream", (stream) => {
  const chunks: Buffer[] = [];
  stream.on("data", (c: Buffer) => chunks.push(c));
  stream.on("end", () => {
    submit(unframe(chunks)).then(
      (body) => {
        stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
        stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
        stream.end(frame(body));
      },
      (err: Error) => {
        // ABORTED for a refused admission (as the proxy's FENCED_OUT is), INTERNAL for anything else.
        const status = err instanceof Refused ? "10" : "13";
        stream.respond(
          { ":status": 200, "content-type": "application/grpc", "grpc-status": status, "grpc-message": encodeURIComponent(err.message) },
          { endStream: true },
        );
      },
    );
  });
});
server.listen(0, "127.0.0.1", () => process.send!((server.address() as { port: number }).port));
process.on("SIGTERM", () => {
  rail.close();
  void pool.end().finally(() => process.exit(0));
});
