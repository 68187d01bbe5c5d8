/**
 * The drill's audit Job is built from the audit CronJob the chart renders, by the one script the
 * cluster test and deploy/drills/replica-kill.sh share. The construction finds `check` by value:
 * it holds with today's command and with a new node flag in front of the entrypoint. The
 * negative control is the positional construction the cluster test used to carry: the same
 * check on the flagged command catches it.
 */
import { describe, expect, it } from "vitest";
import { byKind, component, render, type K8sObject } from "../helm/render.js";
import { auditJobPatch } from "./audit-job.js";

type PatchOp = { op: "test" | "replace" | "add"; path: string; value: unknown };

/** Applies the three JSON-patch (RFC 6902) operations the construction uses, as kubectl would; a failed "test" throws. */
function applyPatch(doc: any, ops: PatchOp[]): any {
  const out = structuredClone(doc);
  for (const op of ops) {
    const keys = op.path
      .split("/")
      .slice(1)
      .map((k) => k.replaceAll("~1", "/").replaceAll("~0", "~"));
    const last = keys.pop()!;
    let parent = out;
    for (const k of keys) {
      if (parent?.[k] === undefined) throw new Error(`${op.op} ${op.path}: no ${k}`);
      parent = parent[k];
    }
    if (op.op === "test") {
      if (JSON.stringify(parent[last]) !== JSON.stringify(op.value)) throw new Error(`test ${op.path} failed: ${JSON.stringify(parent[last])}`);
    } else if (op.op === "replace") {
      if (!(last in parent)) throw new Error(`replace ${op.path}: no such member`);
      parent[last] = op.value;
    } else if (Array.isArray(parent)) {
      if (last === "-") parent.push(op.value);
      else parent.splice(Number(last), 0, op.value);
    } else parent[last] = op.value;
  }
  return out;
}

/** What `kubectl create job --from=cronjob/<name>` makes of a CronJob: its job template's labels and spec. */
function jobFrom(cronJob: K8sObject, name: string): any {
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name, labels: { ...(cronJob.spec.jobTemplate.metadata?.labels ?? {}) } },
    spec: structuredClone(cronJob.spec.jobTemplate.spec),
  };
}

type Construction = (command: readonly string[], since: string, label: string) => string;

/** The construction the cluster test carried before: fixed positions for node, its heap flag, the entrypoint. */
const positional: Construction = (_command, since, label) =>
  JSON.stringify([
    { op: "test", path: "/spec/template/spec/containers/0/command/3", value: "check" },
    { op: "test", path: "/spec/template/spec/containers/0/command/4", value: "--since" },
    { op: "replace", path: "/spec/template/spec/containers/0/command/5", value: since },
    { op: "add", path: "/spec/template/spec/containers/0/command/-", value: "--quiescent" },
    { op: "add", path: "/metadata/labels/railfence.dev~1drill", value: label },
  ]);

const SINCE = "2026-12-03T10:00:00Z";
const MINIMAL = ["rail.url=https://rail.example.com", "rail.existingSecret=rail-cred", "rail.egress.cidrs={203.0.113.0/24}"];
const cronJob = byKind(render({ set: MINIMAL }), "CronJob").find((o) => component(o) === "audit")!;
const commandOf = (job: any): string[] => job.spec.template.spec.containers[0].command;

/** A copy of the CronJob whose audit command has `flag` right after `node`. */
function withLeadingFlag(flag: string): K8sObject {
  const cj = structuredClone(cronJob);
  cj.spec.jobTemplate.spec.template.spec.containers[0].command.splice(1, 0, flag);
  return cj;
}

/** Builds the drill's Job with a construction; a refusal (script exit, failed "test" op) throws. */
function drillJob(construction: Construction, cj: K8sObject): any {
  const job = jobFrom(cj, "audit-drill");
  return applyPatch(job, JSON.parse(construction(commandOf(job), SINCE, "audit-drill")) as PatchOp[]);
}

/** The drill's check: the CronJob's own command with this run's window and --quiescent, nothing else changed. */
function expectDrillCheck(job: any, cj: K8sObject): void {
  const original = commandOf(jobFrom(cj, "x"));
  const at = original.indexOf("check");
  const expected = [...original];
  expected[at + 2] = SINCE;
  expected.push("--quiescent");
  expect(commandOf(job)).toEqual(expected);
  expect(job.metadata.labels["railfence.dev/drill"]).toBe("audit-drill");
}

describe("the drill's audit Job, made from the audit CronJob", () => {
  it("today's command: `check --since <this run>` plus --quiescent, the rest as the chart renders it", () => {
    expect(commandOf(jobFrom(cronJob, "x"))).toContain("check");
    expectDrillCheck(drillJob(auditJobPatch, cronJob), cronJob);
  });

  it("a new node flag before the entrypoint changes nothing", () => {
    for (const flag of ["--enable-source-maps", "--stack-size=2048"]) {
      const cj = withLeadingFlag(flag);
      expectDrillCheck(drillJob(auditJobPatch, cj), cj);
    }
  });

  it("negative control: the positional construction breaks on a leading flag, and the same check catches it", () => {
    // It held with today's command, which is why nobody saw it go stale.
    expectDrillCheck(drillJob(positional, cronJob), cronJob);
    const cj = withLeadingFlag("--enable-source-maps");
    expect(() => expectDrillCheck(drillJob(positional, cj), cj)).toThrow();
  });

  it("refuses a command with no `check`, or whose `check` is not followed by `--since <window>`", () => {
    expect(() => auditJobPatch(["node", "dist/services/cli/main.js", "reconcile"], SINCE, "x")).toThrow(/no 'check'/);
    expect(() => auditJobPatch(["node", "main.js", "check", "--json"], SINCE, "x")).toThrow(/--since/);
    expect(() => auditJobPatch(["node", "main.js", "check", "--since"], SINCE, "x")).toThrow(/no value/);
  });

  it("the patch's test ops keep kubectl from auditing another command than the one it was made for", () => {
    const patch = JSON.parse(auditJobPatch(commandOf(jobFrom(cronJob, "x")), SINCE, "x")) as PatchOp[];
    const shifted = jobFrom(withLeadingFlag("--enable-source-maps"), "x");
    expect(() => applyPatch(shifted, patch)).toThrow(/test .* failed/);
  });
});
