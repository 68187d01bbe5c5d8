/**
 * The catalogue of reasons (services/shared/domain/reasons.ts) is the only source of what a refusal
 * says: these tests fail when product code can put a reason on the wire, or compares an answer
 * with a reason, that the catalogue does not hold; when the client library's copy or
 * docs/errors.md differ from it; and when a hand-written doc pairs a reason with another code.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ALL_REASONS, findReason } from "../../services/shared/domain/reasons.js";
import { codeName, generatedFiles } from "../../tools/generate-reasons.js";
import { docPairs } from "./doc-pairs.js";
import { productFiles, scanProduct, scanSource } from "./reason-scan.js";

const ROOT = join(import.meta.dirname, "../..");
const WIRE_REASONS: ReadonlySet<string> = new Set(ALL_REASONS.map((e) => e.reason));

describe("product code uses no reason outside the catalogue", () => {
  it("scans the services and the client library (a scan that read nothing would prove nothing)", () => {
    const files = productFiles(ROOT);
    expect(files).toContain("services/rail-proxy/proxy-handlers.ts");
    expect(files).toContain("services/executor/pay-one.ts");
    expect(files).toContain("clients/typescript/src/retry.ts");
    expect(files.some((f) => f.includes("/gen/") || f.endsWith(".test.ts"))).toBe(false);
  });

  it("builds ErrorInfo only in errors.ts, casts nothing to a catalogue type, and compares reasons only with catalogued words", () => {
    const findings = scanProduct(ROOT, WIRE_REASONS);
    expect(findings.map((f) => `${f.file}:${f.line} ${f.rule} ${f.text}`)).toEqual([]);
  });

  it("the scan catches each way around the catalogue (negative control)", () => {
    const planted = [
      'const info = { desc: ErrorInfoSchema, value: { reason: "MADE_UP" } };',
      "const e = { ...REASONS.FENCED_OUT } as ReasonEntry;",
      'if (reason === "FENCED_OUTT") return;',
      'if (errorReason(err) === "NOT_AMBIGUOS") return;',
      'if ("LOCK_HLD" !== ce.reason) return;',
      'switch (reason) {\n  case "FENCED_OUT":\n  case "DUPLICATE_SUBMISSON":\n    break;\n}',
      'const HUMAN = new Set(["PAYOUT_MISMATCH", "PAYOUT_MISSING"]);\nif (HUMAN.has(reason)) stop();',
      'if (["RAIL_AMBIGUOUS", "RAIL_AMBIGUITY"].includes(reason)) wait();',
    ].join("\n");
    const found = scanSource("services/executor/planted.ts", planted, WIRE_REASONS);
    const typos = ["DUPLICATE_SUBMISSON", "FENCED_OUTT", "LOCK_HLD", "NOT_AMBIGUOS", "PAYOUT_MISSING", "RAIL_AMBIGUITY"];
    const caught = found.map((f) => (f.rule === "reason-literal" ? f.text : f.rule));
    expect(caught.sort()).toEqual([...typos, "cast-to-catalogue-type", "error-info-outside-errors-ts"].sort());
    // Catalogued words, empty reasons and other fields named *reason pass.
    const clean = 'if (reason === "FENCED_OUT" || reason === "") x(); const y = failureReason === "RAIL_REJECTED";';
    expect(scanSource("services/executor/clean.ts", clean, WIRE_REASONS)).toEqual([]);
  });
});

describe("generated from the catalogue", () => {
  for (const f of generatedFiles()) {
    it(`${f.path} is what \`npm run generate\` makes of it`, () => {
      expect(f.actual, `${f.path} is out of date: run \`npm run generate\``).toBe(f.expected);
    });
  }

  it("docs/errors.md lists every entry with its code", () => {
    const doc = readFileSync(join(ROOT, "docs/errors.md"), "utf8");
    for (const e of ALL_REASONS) expect(doc, e.id).toContain(`| \`${e.reason}\` | \`${codeName(e.code)}\` | `);
    expect(docPairs(doc).length).toBeGreaterThanOrEqual(ALL_REASONS.length);
  });
});

describe("hand-written docs agree with the catalogue", () => {
  const docsDir = readdirSync(join(ROOT, "docs"), { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".md"));
  const docs = ["README.md", "clients/typescript/README.md", ...docsDir.map((f) => `docs/${f}`)];

  it("reads code-and-reason pairs from the docs (so a wrong pair would be seen)", () => {
    const all = docs.flatMap((d) => docPairs(readFileSync(join(ROOT, d), "utf8")));
    expect(all.length).toBeGreaterThan(100);
    const sample = "| code | reason | when |\n|---|---|---|\n| `ABORTED` | `LOCK_HELD` | x |\n`aborted`, reason `FENCED_OUT`; `FAILED_PRECONDITION LEASE_LOST`";
    expect(docPairs(sample)).toEqual([
      { line: 3, code: Code.Aborted, reason: "LOCK_HELD" },
      { line: 4, code: Code.Aborted, reason: "FENCED_OUT" },
      { line: 4, code: Code.FailedPrecondition, reason: "LEASE_LOST" },
    ]);
  });

  for (const d of docs) {
    it(`${d}: every reason named with a code is catalogued with that code`, () => {
      const wrong = docPairs(readFileSync(join(ROOT, d), "utf8"))
        .filter((p) => !findReason(p.code, p.reason))
        .map((p) => `${d}:${p.line} ${Code[p.code]} ${p.reason}${WIRE_REASONS.has(p.reason) ? " (catalogued with another code)" : " (not in the catalogue)"}`);
      expect(wrong).toEqual([]);
    });
  }
});
