#!/usr/bin/env bash
# Prints the JSON patch that turns a Job made from the audit CronJob into a drill's check:
# the `--since` window replaced, `--quiescent` appended, the run's label added.
#
#   audit-job-patch.sh SINCE LABEL -- COMMAND_WORD...
#
# The command is the audit container's command as the cluster holds it. `check` is found by
# value, never by position: the chart puts node flags (the heap limit, and whatever comes next)
# before the entrypoint, so a fixed index breaks on any harmless new flag. The patch keeps
# JSON-patch "test" ops at the positions it found, so kubectl refuses it (rather than audit the
# wrong thing) if the Job it is applied to has another command. Used by replica-kill.sh and by
# test/cluster (one construction); test/cluster/audit-job.test.ts runs it on the chart's command.
set -euo pipefail

die() { echo "audit-job-patch: $*" >&2; exit 2; }
[ $# -ge 3 ] && [ "$3" = "--" ] || die "usage: audit-job-patch.sh SINCE LABEL -- COMMAND_WORD..."
since=$1 label=$2
shift 3
words=("$@")

json_string() { # a JSON string literal for $1 (no control characters expected in a command)
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}
  printf '"%s"' "$s"
}

check_at=-1
for i in "${!words[@]}"; do
  if [ "${words[$i]}" = "check" ]; then
    [ "$check_at" -lt 0 ] || die "the command has more than one 'check': ${words[*]}"
    check_at=$i
  fi
done
[ "$check_at" -ge 0 ] || die "no 'check' in the audit command: ${words[*]}"
since_at=$((check_at + 1))
[ "${words[$since_at]:-}" = "--since" ] || die "'check' is not followed by '--since <window>': ${words[*]}"
[ $((since_at + 1)) -lt ${#words[@]} ] || die "'--since' has no value: ${words[*]}"

c=/spec/template/spec/containers/0/command
printf '[%s,%s,%s,%s,%s]\n' \
  "{\"op\":\"test\",\"path\":\"$c/$check_at\",\"value\":\"check\"}" \
  "{\"op\":\"test\",\"path\":\"$c/$since_at\",\"value\":\"--since\"}" \
  "{\"op\":\"replace\",\"path\":\"$c/$((since_at + 1))\",\"value\":$(json_string "$since")}" \
  "{\"op\":\"add\",\"path\":\"$c/-\",\"value\":\"--quiescent\"}" \
  "{\"op\":\"add\",\"path\":\"/metadata/labels/railfence.dev~1drill\",\"value\":$(json_string "$label")}"
