/**
 * The cluster scripts never search a pipe with `grep -q` under `pipefail`: grep exits at its
 * first match, the writer then gets SIGPIPE on a full pipe, and the pipeline fails although the
 * line was there. That failed a cold `npm run test:cluster` once ("coredns ... is not in
 * containerd after the import"); deploy/cluster/up.sh now reads the list whole, then searches it.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { root } from "../helm/helm-tool.js";

const scripts = ["deploy/cluster", "deploy/drills"].flatMap((d) =>
  readdirSync(join(root, d))
    .filter((f) => f.endsWith(".sh"))
    .map((f) => join(d, f)),
);

describe("cluster scripts and pipefail", () => {
  it("no script pipes into grep -q (outside comments)", () => {
    const found = scripts.flatMap((f) =>
      readFileSync(join(root, f), "utf8")
        .split("\n")
        .map((line, i) => ({ f, n: i + 1, code: line.replace(/(^|\s)#.*$/, "") }))
        .filter((l) => /\|\s*grep\s+(-\w*q|--quiet)/.test(l.code))
        .map((l) => `${l.f}:${l.n}`),
    );
    expect(scripts.length).toBeGreaterThan(4);
    expect(found).toEqual([]);
  });

  it("negative control: the pattern fails under pipefail although the line is there; reading whole, then searching, passes", () => {
    const piped = spawnSync("bash", ["-c", "set -o pipefail; seq 1 200000 | grep -qxF 1"]);
    expect(piped.status).not.toBe(0);
    expect(execFileSync("bash", ["-c", 'set -o pipefail; out=$(seq 1 200000); grep -qxF 1 <<<"$out" && echo found'], { encoding: "utf8" }).trim()).toBe(
      "found",
    );
  });
});
