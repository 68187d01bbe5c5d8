/**
 * The drill's audit Job, made from the release's audit CronJob. The construction is one script,
 * deploy/drills/audit-job-patch.sh, shared with deploy/drills/replica-kill.sh: it finds `check`
 * in the container's command by value, so a new node flag before the entrypoint cannot shift it.
 */
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { root } from "./kube.js";

export const AUDIT_JOB_PATCH = join(root, "deploy", "drills", "audit-job-patch.sh");

/** The JSON patch (as text) that turns a Job from the audit CronJob with this command into the drill's check. */
export function auditJobPatch(command: readonly string[], since: string, label: string): string {
  return execFileSync(AUDIT_JOB_PATCH, [since, label, "--", ...command], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
}
