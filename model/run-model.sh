#!/usr/bin/env bash
# npm run model: checks the protocol model (model/railfence.pml) with spin.
#
#   1. the guarded protocol, exhaustively, for each bounded configuration below: every assertion
#      holds and no process can get stuck outside an end state;
#   2. liveness (every intent leaves FORWARDING) under weak fairness;
#   3. the negative controls: each removes one guard with a compile-time switch, and spin MUST
#      find a counterexample for the property named in the table. Its trail is replayed and
#      printed in plain words (the model narrates replays; verification runs print nothing).
#
# Prints one verdict line per run (property, states, time, PASS / counterexample found) and
# exits non-zero when a guarded run fails or a negative control finds no trail.
# MODEL_ONLY=<name,...> runs only the named cases; MODEL_TRAILS=<dir> also writes each
# narrated trail to <dir>/<case>.txt.
set -uo pipefail
cd "$(dirname "$0")"

if ! command -v spin >/dev/null 2>&1; then
  echo "spin not found: installing it (Debian package 'spin')"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -qq spin >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq spin >/dev/null; }; } ||
    { echo "could not install spin"; exit 1; }
fi
command -v gcc >/dev/null 2>&1 || { echo "gcc is required to compile spin's verifier"; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp railfence.pml "$work/"

# name | kind | expected property (controls) | spin -D flags | pan compile flags | pan run flags
# Fault bounds: CRASHES (replica crashes), RAIL_LOSE (booked, answer lost), RAIL_DROP (call never
# lands), XLOST (an executor gives up on an answer); MAXTOK = tokens the lock issues = attempts.
CASES=$(cat <<'EOF'
safety-2-attempts|verify||-DMAXTOK=2 -DCRASHES=0 -DRAIL_LOSE=0 -DRAIL_DROP=0 -DXLOST=0|-DCOLLAPSE|
safety-2-attempts-crash|verify||-DMAXTOK=2 -DCRASHES=1 -DRAIL_LOSE=0 -DRAIL_DROP=0 -DXLOST=0|-DCOLLAPSE|
safety-2-attempts-rail-lost-answer|verify||-DMAXTOK=2 -DCRASHES=0 -DRAIL_LOSE=1 -DRAIL_DROP=0 -DXLOST=0|-DCOLLAPSE|
safety-2-attempts-executor-lost-answer|verify||-DMAXTOK=2 -DCRASHES=0 -DRAIL_LOSE=0 -DRAIL_DROP=0 -DXLOST=1|-DCOLLAPSE|
safety-2-attempts-rail-unknown-status|verify||-DMAXTOK=2 -DCRASHES=0 -DRAIL_LOSE=0 -DRAIL_DROP=0 -DXLOST=0 -DRAIL_UNKNOWN=1|-DCOLLAPSE|
safety-1-attempt-all-faults|verify||-DMAXTOK=1 -DCRASHES=1 -DRAIL_LOSE=1 -DRAIL_DROP=1 -DXLOST=1|-DCOLLAPSE|
safety-2-attempts-all-faults-bitstate|bitstate||-DMAXTOK=2 -DCRASHES=1 -DRAIL_LOSE=1 -DRAIL_DROP=1 -DXLOST=1|-DBITSTATE|-w28 -Q2
liveness-1-attempt|liveness||-DLIVENESS -DMAXTOK=1 -DCRASHES=1 -DRAIL_LOSE=1 -DRAIL_DROP=1 -DXLOST=1|-DNFAIR=4|-a -f
fencing-off|control|ok_inv01_admitted_tokens_increase|-DNO_MARK -DMAXTOK=2 -DCRASHES=0 -DRAIL_LOSE=0 -DRAIL_DROP=0 -DXLOST=0|-DBFS|
mark-in-memory-restart|control|ok_inv01_admitted_tokens_increase|-DMARK_MEMORY -DREPLICAS=1 -DCRASHES=1 -DMAXTOK=2 -DRAIL_LOSE=0 -DRAIL_DROP=0 -DXLOST=0|-DBFS|
mark-in-memory-two-replicas|control|ok_inv01_admitted_tokens_increase|-DMARK_MEMORY -DREPLICAS=2 -DCRASHES=0 -DMAXTOK=2 -DRAIL_LOSE=0 -DRAIL_DROP=0 -DXLOST=0|-DBFS|
group-mark-snapshot|control|ok_inv01_admitted_tokens_increase|-DGROUP_MARK_SNAPSHOT -DMAXTOK=2 -DCRASHES=0 -DRAIL_LOSE=0 -DRAIL_DROP=0 -DXLOST=0|-DBFS|
no-forward-budget|control|ok_no_payment_after_not_paid|-DNO_BUDGET -DMAXTOK=1 -DCRASHES=0 -DRAIL_LOSE=0 -DRAIL_DROP=0 -DXLOST=0|-DBFS|
no-one-live-submission|control|ok_inv02_no_payout_paid_twice,ok_inv03_failed_payout_never_paid|-DNO_ONE_LIVE -DMAXTOK=2 -DCRASHES=0 -DRAIL_LOSE=0 -DRAIL_DROP=0 -DXLOST=0|-DBFS|
no-payout-binding|control|ok_inv03_failed_payout_never_paid,ok_no_duplicate_alarm_for_honest_executor|-DNO_BINDING -DMAXTOK=2 -DCRASHES=0 -DRAIL_LOSE=0 -DRAIL_DROP=0 -DXLOST=0|-DBFS|
no-lookup-before-resubmit|control|ok_no_duplicate_alarm_for_honest_executor|-DNO_LOOKUP -DMAXTOK=2 -DCRASHES=0 -DRAIL_LOSE=0 -DRAIL_DROP=0 -DXLOST=0|-DBFS|
unknown-status-as-rejected|control|ok_inv03_failed_payout_never_paid,ok_inv02_no_payout_paid_twice|-DUNKNOWN_AS_REJECTED -DRAIL_UNKNOWN=1 -DMAXTOK=2 -DCRASHES=0 -DRAIL_LOSE=0 -DRAIL_DROP=0 -DXLOST=0|-DBFS|
unclosed-accepted|control|ok_accepted_payout_closed|-DUNCLOSED_ACCEPTED -DMAXTOK=1 -DCRASHES=0 -DRAIL_LOSE=0 -DRAIL_DROP=0 -DXLOST=0|-DBFS|
safety-2-attempts-residual-window-end-state|verify||-DRESIDUAL_WINDOW -DEND_STATE_ONLY -DMAXTOK=2 -DCRASHES=0 -DRAIL_LOSE=0 -DRAIL_DROP=0 -DXLOST=0|-DCOLLAPSE|
residual-window-not-paid-reopens|control|ok_inv02_no_payout_paid_twice|-DRESIDUAL_WINDOW -DNOT_PAID_REOPENS -DEND_STATE_ONLY -DMAXTOK=2 -DCRASHES=0 -DRAIL_LOSE=0 -DRAIL_DROP=0 -DXLOST=0|-DBFS|
residual-window|control|ok_no_payment_after_not_paid|-DRESIDUAL_WINDOW -DMAXTOK=1 -DCRASHES=0 -DRAIL_LOSE=0 -DRAIL_DROP=0 -DXLOST=0|-DBFS|
no-budget-no-flags|control|ok_payment_after_not_paid_is_flagged|-DEND_STATE_ONLY -DNO_BUDGET -DNO_LATE_FLAG -DNO_NOT_PAID_WATCH -DMAXTOK=1 -DCRASHES=0 -DRAIL_LOSE=0 -DRAIL_DROP=0 -DXLOST=0|-DBFS|
no-sweeper-no-reconciler-liveness|liveness-control|acceptance cycle|-DLIVENESS -DNO_SWEEPER -DNO_RECONCILER -DMAXTOK=1 -DCRASHES=1 -DRAIL_LOSE=0 -DRAIL_DROP=0 -DXLOST=0|-DNFAIR=4|-a -f
EOF
)

failed=0
ran=0
summary=()

# Names for the numbers the model prints in braces.
NAMES='s/{state=0}/no row/g; s/{state=1}/FORWARDING/g; s/{state=2}/ACCEPTED/g; s/{state=3}/REJECTED/g;
s/{state=4}/TIMEOUT/g; s/{state=5}/RESOLVED_PAID/g; s/{state=6}/RESOLVED_NOT_PAID/g; s/{state=7}/NOT_FORWARDED/g;
s/{phase=0}/young (within deadline + margin)/g; s/{phase=1}/older than deadline + margin/g; s/{phase=2}/older than the settlement window/g;
s/{payout=2}/PAID/g; s/{payout=3}/FAILED/g; s/{payout=4}/UNKNOWN/g;
s/{answer=0}/ADMITTED/g; s/{answer=1}/ACCEPTED/g; s/{answer=2}/REJECTED/g; s/{answer=3}/RAIL_AMBIGUOUS/g; s/{answer=4}/FENCED_OUT/g;
s/{answer=5}/PAYOUT_NOT_PAYABLE or PAYOUT_FENCE_MISMATCH/g; s/{answer=6}/PAYOUT_ALREADY_SUBMITTED/g; s/{answer=7}/DUPLICATE_SUBMISSION/g;
s/{answer=8}/NOT_FORWARDED/g; s/{answer=9}/the ledger row (late)/g; s/{answer=10}/no answer/g; s/{answer=11}/an undocumented status/g'

narrate() { # replays the trail in $dir with the case's flags; prints the model's own narration
  local dir=$1 flags=$2
  # shellcheck disable=SC2086
  (cd "$dir" && spin $flags -t railfence.pml 2>&1) | sed -n 's/^ *MODEL /    /p' | sed "$NAMES"
}

while IFS='|' read -r name kind expect dflags ccflags runflags; do
  [ -z "$name" ] && continue
  if [ -n "${MODEL_ONLY:-}" ] && [[ ",$MODEL_ONLY," != *",$name,"* ]]; then continue; fi
  ran=$((ran + 1))
  dir="$work/$name"
  mkdir -p "$dir" && cp railfence.pml "$dir/"
  # shellcheck disable=SC2086
  if ! (cd "$dir" && spin $dflags -a railfence.pml >spin.log 2>&1); then
    echo "FAIL  $name: spin could not generate the verifier"; sed 's/^/    /' "$dir/spin.log"; failed=$((failed + 1)); continue
  fi
  case "$kind" in
    verify|bitstate|control) cc="-DSAFETY -DNOCLAIM" ;;
    *) cc="" ;;
  esac
  # shellcheck disable=SC2086
  # Controls stop at their first trail: compiling fast matters more than searching fast.
  opt=-O2; [ "$kind" = control ] && opt=-O0
  # shellcheck disable=SC2086
  if ! (cd "$dir" && gcc $opt -w $cc $ccflags -o pan pan.c 2>"$dir/cc.log"); then
    echo "FAIL  $name: the verifier did not compile"; sed 's/^/    /' "$dir/cc.log"; failed=$((failed + 1)); continue
  fi
  start=$(date +%s.%N)
  # shellcheck disable=SC2086
  (cd "$dir" && ./pan -m3000000 $runflags >pan.out 2>&1)
  secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
  out="$dir/pan.out"
  states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$out" | head -1)
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$out" | head -1)
  first=$(grep -m1 -E '^pan:1: ' "$out" | sed 's/^pan:1: //; s/ (at depth.*//')
  depth_short=$(grep -c 'max search depth too small' "$out")
  timed_out=$(grep -ci 'time limit' "$out")
  flags_txt=$(echo "$dflags" | sed 's/-D//g')
  case "$kind" in
    verify|liveness|bitstate)
      what="all properties hold"; [ "$kind" = liveness ] && what="every intent leaves FORWARDING (weak fairness): holds"
      mode="exhaustive"; [ "$kind" = bitstate ] && mode="bit-state hashing, NOT exhaustive ($(sed -n 's/.*hash factor: \([0-9.e+]*\).*/hash factor \1/p' "$out")$([ "$timed_out" != 0 ] && echo ', stopped at its time limit'))"
      if [ "${errors:-1}" = 0 ] && [ "$depth_short" = 0 ]; then
        line="PASS  $name: $what; $states states, ${secs}s, $mode [$flags_txt]"
      else
        line="FAIL  $name: $what: ${first:-no verdict} ($states states, ${secs}s) [$flags_txt]"
        failed=$((failed + 1))
      fi
      echo "$line"; summary+=("$line")
      if [ "${errors:-1}" != 0 ] && [ -f "$dir/railfence.pml.trail" ]; then narrate "$dir" "$dflags"; fi
      ;;
    control|liveness-control)
      hit=""
      IFS=',' read -ra wanted <<<"$expect"
      for w in "${wanted[@]}"; do [[ "$first" == *"$w"* ]] && hit=$w; done
      if [ "${errors:-0}" != 0 ] && [ -n "$hit" ]; then
        line="PASS  $name: counterexample found: $first; $states states, ${secs}s [$flags_txt]"
        echo "$line"; summary+=("$line")
        trail=$(narrate "$dir" "$dflags")
        echo "$trail"
        if [ -n "${MODEL_TRAILS:-}" ]; then mkdir -p "$MODEL_TRAILS" && { echo "$line"; echo "$trail"; } >"$MODEL_TRAILS/$name.txt"; fi
      else
        line="FAIL  $name: expected a counterexample for $expect, got: ${first:-no error} ($states states, ${secs}s) [$flags_txt]"
        echo "$line"; summary+=("$line")
        failed=$((failed + 1))
      fi
      ;;
  esac
done <<<"$CASES"

echo
echo "model verdicts: $((ran - failed)) of $ran as expected"
[ "$ran" -gt 0 ] || { echo "no case ran"; exit 1; }
[ "$failed" -eq 0 ]
