import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { projectRoot } from "../process/project-root.js";
import { REQUEST_MAX_BYTES, renderLimitsTable } from "./limits.js";

const readme = () => readFileSync(join(projectRoot(), "docs", "limits.md"), "utf8");

describe("the documented limits table (docs/limits.md)", () => {
  it("is exactly the table rendered from limits.ts (regenerate it from renderLimitsTable() when a limit changes)", () => {
    const m = /<!-- limits:begin -->\n([\s\S]*?)\n<!-- limits:end -->/.exec(readme());
    expect(m, "docs/limits.md lost its <!-- limits:begin/end --> markers").not.toBeNull();
    expect(m![1]).toBe(renderLimitsTable());
  });

  it("names every server's request size limit, and the admission table states the proxy's", () => {
    for (const server of Object.keys(REQUEST_MAX_BYTES)) expect(readme()).toContain(`| request message, ${server} |`);
    const fence = readFileSync(join(projectRoot(), "docs", "fence.md"), "utf8");
    expect(fence).toContain(`of at most ${REQUEST_MAX_BYTES["rail-proxy"] / 1024} KiB (see [Limits](limits.md))`);
  });
});
