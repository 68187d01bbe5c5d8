/**
 * The hand-made calls of docs/calling-the-api.md (linked from the README) work exactly as printed: every shell block marked
 * `<!-- readme-example: NAME -->` runs, unchanged, in bash against a mesh started the way
 * `npm start` starts it (the same launcher, compiled; its own state folder via
 * RAILFENCE_STATE_DIR so a developer's running mesh is untouched). Each block runs from a folder
 * whose `.railfence` is that mesh's, as it would from the project folder, with the project's
 * `railfence` and `buf` on PATH and grpcurl built from its Go module. What each block must show
 * is asserted by name below, and a block the test does not know (or a known one gone from the
 * page) fails it. The negative control breaks one block (a typo'd field name) and sees it fail.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { projectRoot } from "../../services/shared/process/project-root.js";
import { ensureGoTool } from "../../tools/go-tools.js";
import { eventually } from "../support/time.js";

const root = projectRoot();

/** The marked blocks of docs/calling-the-api.md, by name, in order. */
export function readmeExamples(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of text.matchAll(/<!-- readme-example: ([a-z0-9-]+) -->\n```sh\n([\s\S]*?)\n```/g)) out.set(m[1]!, m[2]!);
  return out;
}

/** What each block must print (stdout and stderr together). */
const EXPECT: Record<string, RegExp[]> = {
  grpcurl: [/railfence\.payouts\.v1\.PayoutService/, /"payoutId": "po_[a-z0-9]+"/, /"accountId": "acc-1"/],
  curl: [/"payoutId":"po_[a-z0-9]+"/, /"clientReference":"invoice-42"/],
  "buf-curl": [/railfence\.payouts\.v1\.PayoutService\/CreatePayout/, /UNKNOWN_FIELD/, /refused, as it should be/],
  cli: [/po_[a-z0-9]+/, /acc-2/],
};

let dir: string;
let launcher: ChildProcess | undefined;
let grpcurlDir: string;

beforeAll(async () => {
  grpcurlDir = join(await ensureGoTool("grpcurl"), "..");
  dir = mkdtempSync(join(tmpdir(), "railfence-readme-"));
  // The folder the examples run in: its .railfence is the mesh's, its node_modules/.bin has the
  // project's CLI and buf (what `npx` finds in the project folder).
  const bin = join(dir, "node_modules", ".bin");
  mkdirSync(bin, { recursive: true });
  symlinkSync(join(root, "bin", "railfence.js"), join(bin, "railfence"));
  symlinkSync(join(root, "node_modules", ".bin", "buf"), join(bin, "buf"));
  launcher = spawn(process.execPath, [join(root, "dist", "tools", "harness", "start.js")], {
    cwd: root,
    env: { ...process.env, RAILFENCE_STATE_DIR: join(dir, ".railfence") },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  launcher.stdout!.on("data", (b: Buffer) => {
    output += b.toString();
  });
  launcher.stderr!.on("data", (b: Buffer) => {
    output += b.toString();
  });
  await eventually(
    () => {
      if (launcher!.exitCode !== null) throw new Error(`npm start's launcher exited ${launcher!.exitCode}:\n${output}`);
      return output.includes("railfence is up");
    },
    "npm start to print 'railfence is up'",
    { timeoutMs: 180_000, everyMs: 250 },
  ).catch((err: Error) => {
    throw new Error(`${err.message}\n${output}`);
  });
  expect(existsSync(join(dir, ".railfence", "env"))).toBe(true);
}, 45 * 60_000);

afterAll(async () => {
  if (launcher && launcher.exitCode === null) {
    const exited = new Promise((r) => launcher!.once("exit", r));
    launcher.kill("SIGINT");
    await Promise.race([exited, new Promise((r) => setTimeout(r, 60_000))]);
    if (launcher.exitCode === null) launcher.kill("SIGKILL");
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 90_000);

/** Runs one block in bash (errexit, as a reader's pasted lines would stop at a failure). */
function runBlock(script: string): { code: number; output: string } {
  const res = spawnSync("bash", ["-e", "-c", script], {
    cwd: dir,
    encoding: "utf8",
    timeout: 120_000,
    env: { ...process.env, PATH: `${join(dir, "node_modules", ".bin")}:${grpcurlDir}:${process.env.PATH}` },
  });
  return { code: res.status ?? -1, output: `${res.stdout}${res.stderr}` };
}

const examples = readmeExamples(readFileSync(join(root, "docs", "calling-the-api.md"), "utf8"));

describe("the documented API examples, run as printed against npm start's mesh", () => {
  it("docs/calling-the-api.md marks exactly the examples this test knows", () => {
    expect([...examples.keys()].sort()).toEqual(Object.keys(EXPECT).sort());
  });

  for (const name of Object.keys(EXPECT)) {
    it(`${name}`, () => {
      const script = examples.get(name);
      expect(script, `docs/calling-the-api.md block ${name}`).toBeDefined();
      const { code, output } = runBlock(script!);
      expect(code, output).toBe(0);
      for (const re of EXPECT[name]!) expect(output, `${name} prints ${re}`).toMatch(re);
    }, 180_000);
  }

  it("negative control: the curl example with a misspelt field fails, and says which", () => {
    const broken = examples.get("curl")!.replace('"clientReference"', '"clientRefrence"');
    expect(broken).not.toBe(examples.get("curl"));
    const { code, output } = runBlock(broken);
    expect(code).not.toBe(0);
    expect(output).toMatch(/UNKNOWN_FIELD/);
  }, 180_000);
});
