/**
 * The dispatcher in process: usage mistakes are caught before any call (exit 2), help is
 * printed on stdout (exit 0), and options are checked per command.
 */
import { describe, expect, it } from "vitest";
import { runCli } from "../../services/cli/cli.js";
import { EXIT_OK, EXIT_USAGE } from "../../services/cli/exit-codes.js";
import { parseAmountMinor, parsePayoutState } from "../../services/cli/payouts-commands.js";
import { parseOutcome } from "../../services/cli/submissions-commands.js";
import { PayoutState } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { ResolutionOutcome } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";

// Endpoints that would answer "unreachable" (exit 3) if a usage error wrongly let a call through.
const DEAD = ["--rail-proxy", "http://127.0.0.1:1", "--payouts", "http://127.0.0.1:1", "--lock", "http://127.0.0.1:1"];

async function run(argv: string[], answer = false) {
  const out: string[] = [];
  const err: string[] = [];
  const questions: string[] = [];
  const code = await runCli({
    argv,
    env: {},
    cwd: "/nonexistent-railfence-cwd",
    output: { out: (t) => out.push(t), err: (t) => err.push(t) },
    confirm: async (q) => {
      questions.push(q);
      return answer;
    },
  });
  return { code, stdout: out.join("\n"), stderr: err.join("\n"), questions };
}

describe("usage errors never reach a server", () => {
  const cases: Array<[string, string[], RegExp]> = [
    ["no command", [], /usage: railfence <command>/],
    ["an unknown command", ["pay"], /unknown command: pay/],
    ["an unknown sub-command", ["submissions", "delete", "p-1"], /unknown command: submissions delete/],
    ["a group without a command", ["payouts"], /payouts needs a command/],
    ["a missing payout id", ["submissions", "get"], /missing argument/],
    ["an extra argument", ["submissions", "get", "p-1", "p-2"], /unexpected argument: p-2/],
    ["an unknown option", ["submissions", "get", "p-1", "--frobnicate"], /Unknown option '--frobnicate'/],
    ["an option of another command", ["submissions", "get", "p-1", "--outcome", "PAID"], /does not take --outcome/],
    ["resolve without --actor", ["submissions", "resolve", "p-1", "--outcome", "PAID", "--note", "n", "--yes"], /--actor is required/],
    ["resolve with an empty --actor", ["submissions", "resolve", "p-1", "--outcome", "PAID", "--actor", " ", "--note", "n", "--yes"], /--actor is required/],
    ["resolve without --note", ["submissions", "resolve", "p-1", "--outcome", "PAID", "--actor", "ops", "--yes"], /--note is required/],
    ["resolve with a bad outcome", ["submissions", "resolve", "p-1", "--outcome", "MAYBE", "--actor", "ops", "--note", "n", "--yes"], /PAID or NOT_PAID/],
    ["a decimal amount", ["payouts", "create", "--account", "a", "--amount", "10.50", "--currency", "EUR", "--beneficiary", "b"], /minor units/],
    ["a zero amount", ["payouts", "create", "--account", "a", "--amount", "0", "--currency", "EUR", "--beneficiary", "b"], /greater than 0/],
    ["create without --beneficiary", ["payouts", "create", "--account", "a", "--amount", "1", "--currency", "EUR"], /--beneficiary is required/],
    ["a bad state filter", ["payouts", "list", "--state", "DONE"], /--state must be one of/],
    ["a page size over the ceiling", ["submissions", "unresolved", "--page-size", "501"], /--page-size must be an integer from 1 to 500/],
    ["a bad timeout", ["submissions", "get", "p-1", "--timeout-ms", "soon"], /--timeout-ms/],
    ["a malformed endpoint", ["submissions", "get", "p-1", "--rail-proxy", "nope"], /not a URL/],
    ["reconcile without paydb", ["reconcile"], /reconcile needs paydb/],
  ];
  for (const [name, argv, message] of cases) {
    it(`exits 2 on ${name}`, async () => {
      const r = await run([...argv, ...DEAD]);
      expect(r.stderr).toMatch(message);
      expect(r.code).toBe(EXIT_USAGE);
      expect(r.stdout).toBe("");
      expect(r.questions).toEqual([]);
    });
  }

  it("prints a usage error as one JSON object on stderr under --json", async () => {
    const r = await run(["submissions", "get", "--json", ...DEAD]);
    expect(r.code).toBe(EXIT_USAGE);
    expect(JSON.parse(r.stderr)).toMatchObject({ error: { code: "usage", message: "missing argument" } });
  });
});

describe("help", () => {
  it("railfence --help lists every command on stdout", async () => {
    const r = await run(["--help"]);
    expect(r.code).toBe(EXIT_OK);
    for (const c of ["payouts create", "submissions resolve", "locks inspect", "reconcile", "endpoints"]) expect(r.stdout).toContain(c);
    expect(r.stdout).toMatch(/exit codes/);
  });

  it("help works per command, per group, and as `help <command>`", async () => {
    const a = await run(["submissions", "resolve", "--help"]);
    const b = await run(["help", "submissions", "resolve"]);
    expect(a.code).toBe(EXIT_OK);
    expect(a.stdout).toContain("usage: railfence submissions resolve <payout_id> --outcome PAID|NOT_PAID --actor NAME --note TEXT");
    expect(b.stdout).toBe(a.stdout);
    const g = await run(["help", "payouts"]);
    expect(g.stdout).toContain("railfence payouts list");
    expect((await run(["help", "nothing"])).code).toBe(EXIT_USAGE);
  });
});

describe("endpoints command", () => {
  it("shows flags as the source and masks a paydb password", async () => {
    const r = await run(["endpoints", "--json", "--rail-proxy", "http://127.0.0.1:7201,http://127.0.0.1:7202", "--paydb", "postgres://app:hunter2@db/paydb"]);
    expect(r.code).toBe(EXIT_OK);
    const j = JSON.parse(r.stdout);
    expect(j.railProxy).toEqual({ url: ["http://127.0.0.1:7201", "http://127.0.0.1:7202"], source: "flag" });
    expect(j.payouts.source).toBe("default");
    expect(r.stdout).not.toContain("hunter2");
    const human = await run(["endpoints", "--paydb", "postgres://app:hunter2@db/paydb"]);
    expect(human.stdout).toMatch(/^payouts\s+http:\/\/127\.0\.0\.1:7400\s+default$/m);
    expect(human.stdout).not.toContain("hunter2");
  });
});

describe("value parsers", () => {
  it("parse outcomes, states and amounts", () => {
    expect(parseOutcome("paid")).toBe(ResolutionOutcome.PAID);
    expect(parseOutcome("not-paid")).toBe(ResolutionOutcome.NOT_PAID);
    expect(parsePayoutState("paid")).toBe(PayoutState.PAID);
    expect(parsePayoutState("PAYOUT_STATE_UNKNOWN")).toBe(PayoutState.UNKNOWN);
    expect(() => parsePayoutState("UNSPECIFIED")).toThrow();
    expect(parseAmountMinor("1050")).toBe(1050n);
    expect(() => parseAmountMinor("-5")).toThrow();
    expect(() => parseAmountMinor("1e3")).toThrow();
  });
});
