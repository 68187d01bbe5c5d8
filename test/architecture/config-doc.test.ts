/**
 * docs/configuration.md's tables are what tools/generate-config-doc.ts makes of the config schemas
 * (CI's drift check regenerates them too); a setting without a description, or a default that
 * depends on the host, stops the generator instead of reaching the page.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { env } from "../../services/shared/process/config.js";
import { CONFIG_DOC, fieldDocs, renderDoc, SERVICES, type ServiceConfig } from "../../tools/generate-config-doc.js";

const ROOT = join(import.meta.dirname, "../..");
const doc = readFileSync(join(ROOT, CONFIG_DOC), "utf8");
const read = (file: string) => readFileSync(join(ROOT, file), "utf8");

/** SERVICES with the executor's schema or source replaced. */
function withExecutor(change: (s: ServiceConfig) => ServiceConfig): ServiceConfig[] {
  return SERVICES.map((s) => (s.name === "executor" ? change(s) : s));
}

describe("the configuration reference (docs/configuration.md)", () => {
  it("is what the generator makes of the schemas (npx tsx tools/generate-config-doc.ts)", () => {
    expect(doc).toBe(renderDoc(doc));
  });

  it("lists every setting of every schema once per service, the hand-written prose kept", () => {
    for (const s of SERVICES) {
      for (const key of Object.keys(s.schema.shape)) expect(doc).toContain(`\`${key}\``);
    }
    expect(doc).toContain("No setting removes a guard.");
    expect(doc).toContain("| | `RAIL_FORWARD_BUDGET_MS` | margin / 2, at most 2000 |");
    expect(doc).toContain("| `METRICS_PORT` | all | rail-proxy 9200, rail-stub 9300, lock 9100, payouts 9400, executor 9500, reconciler 9600 |");
  });

  it("fails, naming the service and the variable, on a setting without a description (negative control)", () => {
    const planted = withExecutor((s) => ({ ...s, schema: s.schema.extend({ PLANTED_SETTING: z.string() }) }));
    expect(() => renderDoc(doc, planted)).toThrow(/executor: PLANTED_SETTING has no description/);
    // The same when a comment is removed from the source.
    const stripped = (file: string) => (file === "services/executor/config.ts" ? read(file).replace("  /** Payouts in flight at once. */\n", "") : read(file));
    expect(() => renderDoc(doc, SERVICES, stripped)).toThrow(/executor: EXECUTOR_CONCURRENCY has no description/);
  });

  it("shows a changed default or bound (negative control)", () => {
    const planted = withExecutor((s) => ({ ...s, schema: s.schema.extend({ POLL_INTERVAL_MS: env.ms(250, 10, 600_000) }) }));
    const rendered = renderDoc(doc, planted);
    expect(doc).toContain("| | `POLL_INTERVAL_MS` | 200 | 10–600000 |");
    expect(rendered).toContain("| | `POLL_INTERVAL_MS` | 250 | 10–600000 |");
    expect(rendered).not.toBe(doc);
  });

  it("refuses a default that depends on the host unless the comment states it (negative control)", () => {
    const stripped = (file: string) =>
      file === "services/executor/config.ts" ? read(file).replace("   * @default `executor-<host>-<pid>`\n", "") : read(file);
    expect(() => renderDoc(doc, SERVICES, stripped)).toThrow(/executor: EXECUTOR_ID: the default depends on this host/);
  });

  it("reads the comment above a field, past line comments, with its @default tag", () => {
    const source = [
      "const schema = z.object({",
      "  /** One line. */",
      "  A_ONE: env.ms(1),",
      "  /**",
      "   * Two",
      "   * lines.",
      "   * @default computed",
      "   */",
      "  // [rule:x]",
      "  B_TWO: z",
      "    .string(),",
      "  C_NONE: z.string(),",
      "});",
      "interface Parsed {",
      "  C_NONE: string;",
      "}",
    ].join("\n");
    expect(Object.fromEntries(fieldDocs("x.ts", source))).toEqual({ A_ONE: { text: "One line." }, B_TWO: { text: "Two lines.", dflt: "computed" } });
  });
});
