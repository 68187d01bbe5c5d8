/**
 * One CreatePayout over plain node:http2, in Connect JSON or gRPC, returning every header and
 * trailer the server sent: what a generic HTTP client or retry middleware sees, with no Connect
 * client in between to interpret it.
 */
import { create, toBinary } from "@bufbuild/protobuf";
import http2 from "node:http2";
import { CreatePayoutRequestSchema } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { grpcFrame } from "../../services/shared/rpc/grpc-wire.js";

export interface RawAnswer {
  status: number;
  /** Response headers and trailers together (a gRPC error is trailers-only: one HEADERS frame). */
  headers: Record<string, string>;
  body: string;
}

const PATH = "/railfence.payouts.v1.PayoutService/CreatePayout";

export interface PayoutInit {
  accountId: string;
  amountMinor: bigint;
  currency: string;
  beneficiary: string;
}

/** Sends one CreatePayout with `headers` (idempotency-key, x-request-id, ...) over `protocol`. */
export function rawCreatePayout(
  baseUrl: string,
  protocol: "connect-json" | "grpc" | "grpc-web",
  init: PayoutInit,
  headers: Record<string, string>,
  path = PATH,
): Promise<RawAnswer> {
  const body =
    protocol !== "connect-json"
      ? grpcFrame(
          toBinary(
            CreatePayoutRequestSchema,
            create(CreatePayoutRequestSchema, {
              accountId: init.accountId,
              amount: { amountMinor: init.amountMinor, currency: init.currency },
              beneficiary: init.beneficiary,
            }),
          ),
        )
      : Buffer.from(
          JSON.stringify({
            accountId: init.accountId,
            amount: { amountMinor: String(init.amountMinor), currency: init.currency },
            beneficiary: init.beneficiary,
          }),
        );
  const contentType =
    protocol === "grpc"
      ? { "content-type": "application/grpc+proto", te: "trailers" }
      : protocol === "grpc-web"
        ? { "content-type": "application/grpc-web+proto" }
        : { "content-type": "application/json" };
  return new Promise((resolve, reject) => {
    const session = http2.connect(baseUrl);
    session.on("error", reject);
    const req = session.request({ ":method": "POST", ":path": path, ...contentType, ...headers });
    const all: Record<string, string> = {};
    const keep = (h: http2.IncomingHttpHeaders) => {
      for (const [k, v] of Object.entries(h)) if (v !== undefined) all[k] = Array.isArray(v) ? v.join(", ") : String(v);
    };
    let status = 0;
    const chunks: Buffer[] = [];
    req.on("response", (h) => {
      status = Number(h[":status"]);
      keep(h);
    });
    req.on("trailers", keep);
    req.on("data", (d: Buffer) => chunks.push(d));
    req.on("end", () => {
      session.close();
      resolve({ status, headers: all, body: Buffer.concat(chunks).toString("utf8") });
    });
    req.on("error", (e) => {
      session.destroy();
      reject(e);
    });
    req.end(body);
  });
}
