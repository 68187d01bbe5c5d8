#!/usr/bin/env bash
# Cluster replica-kill drill (C5 §5.3 on a real cluster):
#   1. a load Job creates payouts through the payouts API (Idempotency-Key per payout),
#   2. until the executors have settled every payout it created, a Ready rail-proxy pod is killed
#      on a schedule (KILL_MODE below),
#   3. after the load and a settle period, the verdict is the release's own daily audit: a Job
#      made from the audit CronJob (`kubectl create job --from`, so exactly its pod: the image's
#      `railfence check`, the auditor's login and certificate, its NetworkPolicy), with --quiescent
#      and --since the drill's start. It reads paydb and the rail's statement through rail-proxy
#      and fails (exit 5, every violation named) on any invariant violation.
# Runs ONLY against a development install with railStub.enabled=true: the load moves money. Needs
# the audit (audit.enabled=true, the default). Nothing is built or shipped from a checkout: the
# product image holds the audit, and the load is plain node:http2 inside that image.
#
# KILL_MODE:
#   force-delete (default)  kubectl delete pod --grace-period=0 --force: what any cluster user
#       can do. It is NOT a SIGKILL: the pod object goes at once, but the kubelet still runs the
#       preStop hook (cut short) and sends SIGTERM with a grace of at least 2 s, in which
#       rail-proxy drains its in-flight calls. Only a rail call outliving that window dies
#       mid-call; with a fast rail, none does.
#   sigkill  SIGKILL the rail-proxy container on its node through SIGKILL_CMD, run with the
#       container's runtime id appended (e.g. SIGKILL_CMD="ctr -n k8s.io tasks kill -s SIGKILL"
#       where the node's containerd is reachable, as on a kind or a local test cluster). The
#       process dies between intent commit and rail answer, the kubelet restarts the container
#       in the same pod: the drill's real case (C5 §5.3), which managed clusters do not expose.
#   mixed    alternate the two (sigkill first).
# KEEP_READY (1): a kill happens only while more than this many rail-proxy pods are Ready, so the
#   drill takes replicas, not the service: on a slow node, killing the last Ready replica again
#   and again starves the executors (no proxy to ask) until the load never settles. 0 kills
#   whatever is Ready.
# VICTIM (random): which Ready pod. "oldest" takes the one whose rail-proxy container has run
#   longest: clients keep their HTTP/2 connections, so that is the replica most likely to have
#   calls in flight (a fresh replacement often has none, and a kill of it proves little).
# Output: one line per kill, "<time> kill pod/<name> <mode>", the load's summary as JSON, and the
# audit's report (`railfence check --json`).
#
# Usage:
#   IMAGE=REGION-docker.pkg.dev/PROJECT/railfence/railfence@sha256:... deploy/drills/replica-kill.sh
# Optional: NAMESPACE (railfence) RELEASE (railfence) PAYOUTS (300) ACCOUNTS (20) CONCURRENCY (8)
#           KILL_EVERY_S (15) SETTLE_S (60) TIMEOUT_S (900) KILL_MODE (force-delete) SIGKILL_CMD
#           KEEP_READY (1) VICTIM (random)
#           CLIENT_TLS_SECRET: a Secret (tls.crt, tls.key, ca.crt) with a payouts client's certificate
#             (identity in tls.payoutsClientIdentities); required when the release runs mutual TLS
#             (the chart's default), whose payouts API answers no caller without one
set -euo pipefail

NAMESPACE=${NAMESPACE:-railfence}
RELEASE=${RELEASE:-railfence}
PAYOUTS=${PAYOUTS:-300}
ACCOUNTS=${ACCOUNTS:-20}
CONCURRENCY=${CONCURRENCY:-8}
KILL_EVERY_S=${KILL_EVERY_S:-15}
SETTLE_S=${SETTLE_S:-60}
TIMEOUT_S=${TIMEOUT_S:-900}
: "${IMAGE:?set IMAGE to the railfence image the release runs (the load Job runs in it)}"
KILL_MODE=${KILL_MODE:-force-delete}
SIGKILL_CMD=${SIGKILL_CMD:-}
KEEP_READY=${KEEP_READY:-1}
VICTIM=${VICTIM:-random}
case $VICTIM in random|oldest) ;; *) echo "VICTIM must be random or oldest" >&2; exit 2 ;; esac
case $KILL_MODE in
  force-delete) ;;
  sigkill|mixed) [ -n "$SIGKILL_CMD" ] || { echo "KILL_MODE=$KILL_MODE needs SIGKILL_CMD" >&2; exit 2; } ;;
  *) echo "KILL_MODE must be force-delete, sigkill or mixed" >&2; exit 2 ;;
esac

RUN_ID="drill-$(date +%s)"
K=(kubectl -n "$NAMESPACE")
SEL="app.kubernetes.io/instance=$RELEASE"

log() { printf '%s %s\n' "$(date -u +%H:%M:%SZ)" "$*"; }

cleanup() {
  log "cleanup"
  "${K[@]}" delete job "$RUN_ID-load" "$RUN_ID-check" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  "${K[@]}" delete networkpolicy "$RUN_ID-allow-load" --ignore-not-found >/dev/null 2>&1 || true
  "${K[@]}" delete configmap "$RUN_ID-load" --ignore-not-found >/dev/null 2>&1 || true
}
trap cleanup EXIT

# Safety: never run against the real rail.
if [ -z "$("${K[@]}" get deploy -l "$SEL,app.kubernetes.io/component=rail-stub" -o name)" ]; then
  echo "no rail-stub in release $RELEASE: this drill moves money and only runs against railStub.enabled=true" >&2
  exit 2
fi
AUDIT_CRONJOB=$("${K[@]}" get cronjob -l "$SEL,app.kubernetes.io/component=audit" -o jsonpath='{.items[0].metadata.name}')
if [ -z "$AUDIT_CRONJOB" ]; then
  echo "no audit CronJob in release $RELEASE (audit.enabled=false?): the drill's verdict is the release's own audit" >&2
  exit 2
fi
# The audit covers what this run creates: payouts and intents from 5 minutes before now (this
# machine's clock and paydb's may differ a little), UTC ISO-8601; GNU date, else BSD date.
at=$(( $(date +%s) - 300 ))
SINCE=$(date -u -d "@$at" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u -r "$at" +%Y-%m-%dT%H:%M:%SZ)

# The audit CronJob's Job becomes the drill's check through audit-job-patch.sh (beside this
# script): it finds `check` in the command by value, so a new node flag cannot shift it.
AUDIT_JOB_PATCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/audit-job-patch.sh"
check_job_patch() { # since run_id
  local words
  mapfile -t words < <("${K[@]}" get cronjob "$AUDIT_CRONJOB" \
    -o jsonpath='{range .spec.jobTemplate.spec.template.spec.containers[0].command[*]}{@}{"\n"}{end}')
  "$AUDIT_JOB_PATCH" "$1" "$2" -- "${words[@]}"
}

PAYOUTS_SVC=$("${K[@]}" get svc -l "$SEL,app.kubernetes.io/component=payouts,!railfence.dev/metrics" -o jsonpath='{.items[0].metadata.name}')
PAYOUTS_PORT=$("${K[@]}" get svc "$PAYOUTS_SVC" -o jsonpath='{.spec.ports[?(@.name=="grpc")].port}')
CLIENT_TLS_SECRET=${CLIENT_TLS_SECRET:-}
if [ "$("${K[@]}" get svc "$PAYOUTS_SVC" -o jsonpath='{.spec.ports[?(@.name=="grpc")].appProtocol}')" = https ]; then
  [ -n "$CLIENT_TLS_SECRET" ] || { echo "the release runs mutual TLS: set CLIENT_TLS_SECRET to a payouts client's certificate Secret" >&2; exit 2; }
  PAYOUTS_URL="https://$PAYOUTS_SVC.$NAMESPACE.svc:$PAYOUTS_PORT"
else
  PAYOUTS_URL="http://$PAYOUTS_SVC.$NAMESPACE.svc:$PAYOUTS_PORT"
  CLIENT_TLS_SECRET=""
fi
log "run $RUN_ID: $PAYOUTS payouts over $ACCOUNTS accounts via $PAYOUTS_URL"

# The release's NetworkPolicies admit payouts clients only from configured namespaces: let the
# drill's load pods in for the duration of the run (policies are additive).
"${K[@]}" apply -f - <<YAML
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: $RUN_ID-allow-load
spec:
  podSelector:
    matchLabels: {app.kubernetes.io/instance: "$RELEASE", app.kubernetes.io/component: payouts}
  policyTypes: [Ingress]
  ingress:
    - from:
        - podSelector:
            matchLabels: {railfence.dev/drill: "$RUN_ID"}
      ports:
        - port: $PAYOUTS_PORT
YAML

# Security context shared by the drill pods (same rules as the chart's pods).
POD_SECURITY='securityContext: {runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, seccompProfile: {type: RuntimeDefault}}'
CONTAINER_SECURITY='securityContext: {runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}'

# Load: Connect JSON over h2c with node:http2 only (nothing but the image is needed). Each
# payout has its own Idempotency-Key; a retryable answer is retried with the SAME key. The job
# then waits until the executors have settled every payout it created (PAID, FAILED, or UNKNOWN
# = waiting for the reconciler), so that the kills below go on while rail-proxy has calls in
# flight, not only while the API is being called (creating payouts takes seconds; paying them
# is the part the drill is about).
LOAD_JS=$(cat <<'JS'
const http2 = require("node:http2");
const { randomUUID } = require("node:crypto");
const [url, total, accounts, conc] = [process.env.PAYOUTS_URL, +process.env.PAYOUTS, +process.env.ACCOUNTS, +process.env.CONCURRENCY];
const settleTimeoutMs = 1000 * +(process.env.SETTLE_TIMEOUT_S || 600);
let session;
// With mutual TLS, the client certificate mounted at /client-tls (CLIENT_TLS_SECRET).
const fs = require("node:fs");
const tls = fs.existsSync("/client-tls/tls.crt") ? { ca: fs.readFileSync("/client-tls/ca.crt"), cert: fs.readFileSync("/client-tls/tls.crt"), key: fs.readFileSync("/client-tls/tls.key") } : {};
const client = () => { if (!session || session.closed || session.destroyed) { session = http2.connect(url, tls); session.on("error", () => {}); } return session; };
function call(method, body, headers = {}) {
  return new Promise((resolve) => {
    const req = client().request({ ":method": "POST", ":path": `/railfence.payouts.v1.PayoutService/${method}`, "content-type": "application/json", ...headers });
    let data = ""; let status = 0;
    req.setTimeout(15000, () => req.close(http2.constants.NGHTTP2_CANCEL));
    req.on("response", (h) => { status = h[":status"]; });
    req.on("data", (c) => { data += c; });
    req.on("close", () => resolve({ status, data }));
    req.on("error", () => resolve({ status: 0, data: "" }));
    req.end(JSON.stringify(body));
  });
}
const stats = { created: 0, failed: 0, retries: 0 };
const ids = [];
let next = 0;
async function worker() {
  while (next < total) {
    const i = next++;
    const key = randomUUID();
    const body = { accountId: `drill-acct-${i % accounts}`, amount: { amountMinor: "100", currency: "EUR" }, beneficiary: `drill-ben-${i}`, clientReference: `${process.env.RUN_ID}-${i}` };
    for (let attempt = 0; ; attempt++) {
      const r = await call("CreatePayout", body, { "idempotency-key": key });
      if (r.status === 200) { stats.created++; ids.push(JSON.parse(r.data).payout.payoutId); break; }
      const retryable = r.status === 0 || r.status === 503 || r.status === 409 || r.status === 502 || r.status === 504;
      if (!retryable || attempt >= 10) { stats.failed++; console.error(JSON.stringify({ payout: i, status: r.status, body: r.data.slice(0, 200) })); break; }
      stats.retries++;
      await new Promise((s) => setTimeout(s, 200 * 2 ** Math.min(attempt, 5)));
    }
  }
}
async function settle() {
  const states = new Map();
  const done = (s) => s === "PAYOUT_STATE_PAID" || s === "PAYOUT_STATE_FAILED" || s === "PAYOUT_STATE_UNKNOWN";
  const deadline = Date.now() + settleTimeoutMs;
  for (;;) {
    for (const id of ids) {
      if (done(states.get(id))) continue;
      const r = await call("GetPayout", { payoutId: id });
      if (r.status === 200) states.set(id, JSON.parse(r.data).payout.state);
    }
    const open = ids.filter((id) => !done(states.get(id))).length;
    if (open === 0 || Date.now() > deadline) {
      const byState = {};
      for (const id of ids) { const s = (states.get(id) || "OPEN").replace("PAYOUT_STATE_", ""); byState[s] = (byState[s] || 0) + 1; }
      return { open, byState };
    }
    await new Promise((s) => setTimeout(s, 1000));
  }
}
Promise.all(Array.from({ length: conc }, worker)).then(async () => {
  const settled = await settle();
  console.log(JSON.stringify({ event: "load_done", ...stats, ...settled }));
  session?.close();
  process.exit(stats.created > 0 && settled.open === 0 ? 0 : 1);
});
JS
)

"${K[@]}" create configmap "$RUN_ID-load" --from-literal=load.cjs="$LOAD_JS" >/dev/null
"${K[@]}" apply -f - <<YAML
apiVersion: batch/v1
kind: Job
metadata:
  name: $RUN_ID-load
  labels: {railfence.dev/drill: "$RUN_ID"}
spec:
  backoffLimit: 0
  activeDeadlineSeconds: $TIMEOUT_S
  template:
    metadata:
      labels: {railfence.dev/drill: "$RUN_ID"}
    spec:
      restartPolicy: Never
      automountServiceAccountToken: false
      $POD_SECURITY
      containers:
        - name: load
          image: $IMAGE
          command: ["node", "/drill/load.cjs"]
          env:
            - {name: PAYOUTS_URL, value: "$PAYOUTS_URL"}
            - {name: PAYOUTS, value: "$PAYOUTS"}
            - {name: ACCOUNTS, value: "$ACCOUNTS"}
            - {name: CONCURRENCY, value: "$CONCURRENCY"}
            - {name: RUN_ID, value: "$RUN_ID"}
            - {name: SETTLE_TIMEOUT_S, value: "$TIMEOUT_S"}
          volumeMounts:
            - {name: drill, mountPath: /drill, readOnly: true}
$( [ -n "$CLIENT_TLS_SECRET" ] && echo "            - {name: client-tls, mountPath: /client-tls, readOnly: true}" || true)
          $CONTAINER_SECURITY
      volumes:
        - {name: drill, configMap: {name: $RUN_ID-load}}
$( [ -n "$CLIENT_TLS_SECRET" ] && echo "        - {name: client-tls, secret: {secretName: $CLIENT_TLS_SECRET}}" || true)
YAML

# Kill rail-proxy replicas while the executors pay (the load job ends when every payout is
# settled). Only Ready pods are victims: a container SIGKILLed again and again would sit in the
# kubelet's restart back-off and the drill would end up killing nothing.
log "killing a Ready rail-proxy pod every ${KILL_EVERY_S}s ($KILL_MODE, while more than $KEEP_READY are Ready) until the load job ends"
kills=0
deadline=$((SECONDS + TIMEOUT_S))
while :; do
  done_state=$("${K[@]}" get job "$RUN_ID-load" -o jsonpath='{.status.succeeded}{.status.failed}')
  [ -n "$done_state" ] && break
  [ "$SECONDS" -ge "$deadline" ] && { log "load did not finish within ${TIMEOUT_S}s"; break; }
  mapfile -t pods < <("${K[@]}" get pods -l "$SEL,app.kubernetes.io/component=rail-proxy" --field-selector=status.phase=Running \
    -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.status.containerStatuses[?(@.name=="rail-proxy")].ready}{" "}{.status.containerStatuses[?(@.name=="rail-proxy")].containerID}{" "}{.status.containerStatuses[?(@.name=="rail-proxy")].state.running.startedAt}{"\n"}{end}' \
    | awk '$2 == "true" && $3 != "" {print $4, $1, $3}' | sort | cut -d' ' -f2-)
  if [ "${#pods[@]}" -gt "$KEEP_READY" ]; then
    pick=$((RANDOM % ${#pods[@]}))
    [ "$VICTIM" = oldest ] && pick=0
    read -r victim cid <<<"${pods[$pick]}"
    mode=$KILL_MODE
    [ "$KILL_MODE" = mixed ] && { [ $((kills % 2)) -eq 0 ] && mode=sigkill || mode=force-delete; }
    if [ "$mode" = sigkill ]; then
      # shellcheck disable=SC2086
      $SIGKILL_CMD "${cid#*://}" >/dev/null 2>&1 || log "SIGKILL of $victim failed"
    else
      "${K[@]}" delete "pod/$victim" --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
    fi
    log "kill pod/$victim $mode"
    kills=$((kills + 1))
  fi
  sleep "$KILL_EVERY_S"
done
"${K[@]}" logs "job/$RUN_ID-load" --tail=20 || true
log "$kills rail-proxy pods killed; settling ${SETTLE_S}s so executors finish and ambiguity is swept"
"${K[@]}" rollout status deploy -l "$SEL,app.kubernetes.io/component=rail-proxy" --timeout=300s || true
sleep "$SETTLE_S"

# The verdict: the audit CronJob's own pod, once, over this run, with the system drained.
log "audit: a Job from cronjob/$AUDIT_CRONJOB, check --since $SINCE --quiescent"
PATCH=$(check_job_patch "$SINCE" "$RUN_ID")
"${K[@]}" create job "$RUN_ID-check" --from="cronjob/$AUDIT_CRONJOB" --dry-run=client -o json \
  | "${K[@]}" patch --local -f - --type=json -p "$PATCH" -o json \
  | "${K[@]}" create -f - >/dev/null

log "waiting for the audit"
"${K[@]}" wait --for=condition=complete "job/$RUN_ID-check" --timeout=600s &
ok_pid=$!
"${K[@]}" wait --for=condition=failed "job/$RUN_ID-check" --timeout=600s &
fail_pid=$!
status=1
while kill -0 "$ok_pid" 2>/dev/null && kill -0 "$fail_pid" 2>/dev/null; do sleep 2; done
if ! kill -0 "$ok_pid" 2>/dev/null && wait "$ok_pid"; then status=0; fi
kill "$ok_pid" "$fail_pid" 2>/dev/null || true
"${K[@]}" logs "job/$RUN_ID-check" || true
if [ "$status" -eq 0 ]; then log "VERDICT: no invariant violated ($kills kills)"; else log "VERDICT: violations found (the audit's log names them) or the audit could not run"; fi
exit "$status"
