/**
 * The Go side of the repository (clients/go, docs/go-client.md): which `go` runs, with which
 * environment, and the Go-built tools at pinned versions (the protoc plugins for
 * `npm run generate`, grpcurl for the tests).
 *
 * Everything lands in the git-ignored .tools/go: binaries in bin/, the module cache in mod/, the
 * build cache in cache/. After the first download a run needs no network (GOFLAGS=-mod=readonly,
 * GOTOOLCHAIN=local: never a silent go.mod edit, never a toolchain download), and a warm build
 * cache makes repeated runs take seconds. Nothing is installed globally.
 *
 * `tsx tools/go-tools.ts install protoc-gen-go protoc-gen-go-grpc` installs the named tools (the
 * generate script does); a tool already built at its pinned version is kept.
 */
import { execFile, execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, statSync } from "node:fs";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { projectRoot } from "../services/shared/process/project-root.js";

/** Each tool's main package and pinned version (`go install <package>@<version>`). */
export const GO_TOOLS = {
  "protoc-gen-go": { pkg: "google.golang.org/protobuf/cmd/protoc-gen-go", version: "v1.36.12" },
  "protoc-gen-go-grpc": { pkg: "google.golang.org/grpc/cmd/protoc-gen-go-grpc", version: "v1.6.1" },
  grpcurl: { pkg: "github.com/fullstorydev/grpcurl/cmd/grpcurl", version: "v1.9.3" },
} as const;
export type GoTool = keyof typeof GO_TOOLS;

/** Where the official tarball puts go when it is not on PATH (`.ci/run` checks both). */
const FALLBACK_GO = "/usr/local/go/bin/go";

const goHome = () => join(projectRoot(), ".tools", "go");

/** The go command: the one on PATH, else /usr/local/go/bin/go; throws when there is none. */
export function goBinary(): string {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir && existsSync(join(dir, "go"))) return join(dir, "go");
  }
  if (existsSync(FALLBACK_GO)) return FALLBACK_GO;
  throw new Error("no go toolchain: install Go (https://go.dev/dl) or Debian's golang-go; .ci/run does");
}

/**
 * The environment for every go command here: the process's own (PATH, HOME, proxy settings) with
 * the project-local caches. GOFLAGS is replaced, not merged: a developer's -mod=mod must not
 * rewrite go.mod during a test.
 */
export function goEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const home = goHome();
  return {
    ...process.env,
    GOBIN: join(home, "bin"),
    GOCACHE: join(home, "cache"),
    GOMODCACHE: join(home, "mod"),
    // -modcacherw: module files stay deletable, so `rm -rf .tools` works.
    GOFLAGS: "-mod=readonly -modcacherw",
    GOTOOLCHAIN: "local",
    GOTELEMETRY: "off",
    ...extra,
  };
}

/** The path of an installed tool (whether or not it exists yet). */
export function goToolPath(tool: GoTool): string {
  return join(goHome(), "bin", tool);
}

/** The module version a Go binary was built from (`go version -m`), or undefined. */
function builtVersion(binary: string): string | undefined {
  try {
    const out = execFileSync(goBinary(), ["version", "-m", binary], { encoding: "utf8", env: goEnv() });
    return /^\s*mod\s+\S+\s+(\S+)/m.exec(out)?.[1];
  } catch {
    return undefined;
  }
}

/** A cold build of a tool takes minutes; past this, a lock left behind is taken as abandoned. */
const STALE_LOCK_MS = 35 * 60_000;

/**
 * Installs tool at its pinned version unless that build is already there; returns its path.
 * It builds into a private folder and renames the result into place, so two test files asking
 * at once never see half a binary; and one builds while the others wait (a lock folder beside
 * the binary), so a cold machine compiles it once, not once per test file.
 */
export async function ensureGoTool(tool: GoTool): Promise<string> {
  const { version } = GO_TOOLS[tool];
  const target = goToolPath(tool);
  mkdirSync(join(goHome(), "bin"), { recursive: true });
  const lock = `${target}.building`;
  for (;;) {
    if (existsSync(target) && builtVersion(target) === version) return target;
    try {
      mkdirSync(lock);
    } catch {
      // Another process is building it: wait for its result (or for an abandoned lock to age out).
      const age = (() => {
        try {
          return Date.now() - statSync(lock).mtimeMs;
        } catch {
          return 0;
        }
      })();
      if (age > STALE_LOCK_MS) rmSync(lock, { recursive: true, force: true });
      await new Promise((r) => setTimeout(r, 1000));
      continue;
    }
    try {
      if (!(existsSync(target) && builtVersion(target) === version)) await install(tool);
    } finally {
      rmSync(lock, { recursive: true, force: true });
    }
  }
}

/** go install of tool's pinned version into a private folder, renamed into place. */
async function install(tool: GoTool): Promise<void> {
  const { pkg, version } = GO_TOOLS[tool];
  const scratch = mkdtempSync(join(goHome(), "install-"));
  try {
    // Outside any module, so the tool's own go.mod decides its dependencies. Asynchronous: a
    // cold build takes minutes, and a test worker must keep answering meanwhile.
    const { stderr } = await promisify(execFile)(goBinary(), ["install", `${pkg}@${version}`], {
      cwd: scratch,
      env: goEnv({ GOBIN: scratch, GOFLAGS: "-modcacherw" }),
      timeout: 30 * 60_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    if (stderr.trim()) process.stderr.write(stderr);
    renameSync(join(scratch, tool), goToolPath(tool));
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [command, ...tools] = process.argv.slice(2);
  const unknown = tools.filter((t) => !(t in GO_TOOLS));
  if (command !== "install" || tools.length === 0 || unknown.length > 0) {
    console.error(`usage: tsx tools/go-tools.ts install <${Object.keys(GO_TOOLS).join("|")}>...${unknown.length ? ` (unknown: ${unknown.join(", ")})` : ""}`);
    process.exit(2);
  }
  for (const t of tools) await ensureGoTool(t as GoTool);
}
