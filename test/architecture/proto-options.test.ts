/**
 * Every contract under proto/ names its Go package (decision 052): buf's STANDARD lint has no
 * rule that requires `option go_package` (PACKAGE_SAME_GO_PACKAGE only compares files that set
 * it), so this test does. The value is fixed by the file's place: module
 * github.com/railfence/railfence/clients/go, folder gen/<proto folder>, package name <domain>v1.
 * A changed value would move Go importers' packages, so it fails here too (buf breaking's
 * FILE_SAME_GO_PACKAGE is switched off in buf.yaml in favour of this pin).
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, sep } from "node:path";
import { describe, expect, it } from "vitest";
import { projectRoot } from "../../services/shared/process/project-root.js";

const root = projectRoot();
export const GO_MODULE = "github.com/railfence/railfence/clients/go";

function protoFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) return protoFiles(full);
    return full.endsWith(".proto") ? [full] : [];
  });
}

/** The go_package a file at path (relative to proto/, e.g. railfence/lock/v1/lock.proto) must set. */
export function expectedGoPackage(path: string): string {
  const folder = dirname(path);
  const [domain, version] = folder.split("/").slice(-2);
  return `${GO_MODULE}/gen/${folder};${domain}${version}`;
}

/** Problems of one proto file's text: a missing or misplaced go_package, a package off its folder. */
export function goPackageProblems(path: string, text: string): string[] {
  const problems: string[] = [];
  const pkg = /^package\s+([\w.]+)\s*;/m.exec(text)?.[1];
  if (pkg?.replaceAll(".", "/") !== dirname(path)) problems.push(`${path}: package ${pkg} does not match its folder`);
  const options = [...text.matchAll(/^option\s+go_package\s*=\s*"([^"]*)"\s*;/gm)].map((m) => m[1]);
  if (options.length === 0) problems.push(`${path}: no option go_package`);
  else if (options.length > 1 || options[0] !== expectedGoPackage(path))
    problems.push(`${path}: go_package ${options.join(", ")}, want ${expectedGoPackage(path)}`);
  return problems;
}

const files = protoFiles(join(root, "proto")).map((f) => ({ path: relative(join(root, "proto"), f).split(sep).join("/"), text: readFileSync(f, "utf8") }));

describe("go_package on every contract", () => {
  it("sees the contracts (premise)", () => {
    expect(files.map((f) => f.path)).toContain("railfence/payouts/v1/payouts.proto");
    expect(files.length).toBeGreaterThanOrEqual(6);
  });

  it("each file sets the go_package its folder implies, and its Go code is generated there", () => {
    expect(files.flatMap((f) => goPackageProblems(f.path, f.text))).toEqual([]);
    for (const f of files) {
      const generated = join(root, "clients/go/gen", f.path.replace(/\.proto$/, ".pb.go"));
      expect(existsSync(generated), `${generated} (npm run generate)`).toBe(true);
    }
  });

  it("a file without the option, with a moved one, or with two is caught (negative control)", () => {
    const payouts = files.find((f) => f.path === "railfence/payouts/v1/payouts.proto")!;
    const without = payouts.text.replace(/^option go_package.*\n/m, "");
    const moved = payouts.text.replace("/gen/railfence/payouts/v1;payoutsv1", "/gen/payouts;payoutsv1");
    const twice = payouts.text.replace(/^(option go_package.*\n)/m, "$1$1");
    expect(without).not.toBe(payouts.text);
    expect(moved).not.toBe(payouts.text);
    for (const planted of [without, moved, twice]) expect(goPackageProblems(payouts.path, planted)).toHaveLength(1);
  });
});
