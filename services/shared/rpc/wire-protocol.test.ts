import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseContentType as connectParse, parseTimeout as connectTimeout } from "@connectrpc/connect/protocol-connect";
import { parseContentType as grpcParse, parseTimeout as grpcTimeout } from "@connectrpc/connect/protocol-grpc";
import { parseContentType as grpcWebParse } from "@connectrpc/connect/protocol-grpc-web";
import { formatClientTimeout, parseClientTimeout, requestProtocol } from "./wire-protocol.js";

/** Content types near the ones that matter, and anything else. */
const contentType = fc.oneof(
  fc
    .tuple(
      fc.constantFrom("application/", "Application/", "text/", ""),
      fc.constantFrom("grpc", "grpc-web", "grpc-web-text", "connect", "connect+", "json", "proto", "GRPC", "Json"),
      fc.constantFrom("", "+json", "+proto", "+JSON", "json", "proto", "+xml", "+json; charset=utf-8", "+json;charset=UTF8", "; charset=utf-16", " "),
    )
    .map((p) => p.join("")),
  fc.string({ maxLength: 40 }),
);

describe("requestProtocol agrees with connect-node's own routing", () => {
  // A request both sides classify differently would be checked as one codec and decoded as the other.
  it("on any content type, for unary and server-streaming methods", () => {
    fc.assert(
      fc.property(contentType, fc.boolean(), (ct, streaming) => {
        const mine = requestProtocol("POST", ct, streaming);
        const g = grpcParse(ct);
        const w = grpcWebParse(ct);
        const c = connectParse(ct);
        const expected = g
          ? { name: "grpc", binary: g.binary }
          : w && !w.text
            ? { name: "grpc-web", binary: w.binary }
            : c && c.stream === streaming
              ? { name: streaming ? "connect-stream" : "connect", binary: c.binary }
              : undefined;
        expect(mine ? { name: mine.name, binary: mine.binary } : undefined, ct).toEqual(expected);
      }),
      { numRuns: 3000 },
    );
  });

  it("serves POST only", () => {
    expect(requestProtocol("GET", "application/json", false)).toBeUndefined();
    expect(requestProtocol("PUT", "application/grpc", false)).toBeUndefined();
  });
});

describe("client deadlines", () => {
  const header = fc.oneof(fc.stringMatching(/^[0-9]{1,11}[HMSmun]?$/), fc.string({ maxLength: 12 }));

  it("grpc-timeout and connect-timeout-ms parse as connect-node parses them", () => {
    fc.assert(
      fc.property(header, fc.constantFrom("grpc-timeout", "connect-timeout-ms") as fc.Arbitrary<"grpc-timeout" | "connect-timeout-ms">, (v, h) => {
        const theirs = (h === "grpc-timeout" ? grpcTimeout : connectTimeout)(v, 120_000);
        const mine = parseClientTimeout(h, v, 120_000);
        if (theirs.error && theirs.timeoutMs === undefined) expect(mine.kind, v).toBe("malformed");
        else if (theirs.error) expect(mine, v).toEqual({ kind: "too_long", ms: theirs.timeoutMs });
        else expect(mine, v).toEqual({ kind: "ms", ms: theirs.timeoutMs });
      }),
      { numRuns: 3000 },
    );
    expect(parseClientTimeout("grpc-timeout", undefined, 1000)).toEqual({ kind: "none" });
  });

  it("the time left is written back in a form both parsers read", () => {
    expect(parseClientTimeout("grpc-timeout", formatClientTimeout("grpc-timeout", 1234.7), 120_000)).toEqual({ kind: "ms", ms: 1234 });
    expect(parseClientTimeout("connect-timeout-ms", formatClientTimeout("connect-timeout-ms", 99.2), 120_000)).toEqual({ kind: "ms", ms: 99 });
    expect(formatClientTimeout("grpc-timeout", -5)).toBe("0m");
  });
});
