{{/*
Names and labels. Every object carries the app.kubernetes.io/* labels so NetworkPolicies,
ServiceMonitors and operators can select by component without knowing the release name.
*/}}

{{- define "railfence.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "railfence.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "railfence.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Name of one component's objects: <fullname>-<component>. Call with (dict "root" $ "component" "rail-proxy"). */}}
{{- define "railfence.componentName" -}}
{{- printf "%s-%s" (include "railfence.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels: stable for the life of a release (Deployment selectors are immutable). */}}
{{- define "railfence.selectorLabels" -}}
app.kubernetes.io/name: {{ include "railfence.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "railfence.labels" -}}
helm.sh/chart: {{ include "railfence.chart" .root }}
{{ include "railfence.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: railfence
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end -}}

{{/* Image reference: a digest, when given, wins over the tag (immutable deploys). */}}
{{- define "railfence.image" -}}
{{- $img := .Values.image -}}
{{- if $img.digest -}}
{{- printf "%s@%s" $img.repository $img.digest -}}
{{- else -}}
{{- printf "%s:%s" $img.repository (default .Chart.AppVersion $img.tag) -}}
{{- end -}}
{{- end -}}

{{/* Secret names. An existingSecret (created by the operator or External Secrets) wins. */}}
{{- define "railfence.railSecretName" -}}
{{- if .Values.rail.existingSecret -}}
{{- .Values.rail.existingSecret -}}
{{- else -}}
{{- include "railfence.componentName" (dict "root" . "component" "rail-credential") -}}
{{- end -}}
{{- end -}}

{{/*
Database credentials: one per component (values database.<db>.credentials.<cred>); raildb, the
dev stub's, has a single one (call without "cred"). Call with (dict "root" $ "db" "paydb" "cred" "railProxy").
Returns the credential as JSON (use `include ... | fromJson`).
*/}}
{{- define "railfence.dbCred" -}}
{{- $db := index .root.Values.database .db -}}
{{- if .cred -}}
{{- index $db.credentials .cred | toJson -}}
{{- else -}}
{{- omit $db "url" | toJson -}}
{{- end -}}
{{- end -}}

{{/* A credential's id in object names and paths: paydb-rail-proxy, lockdb-migrations, raildb. */}}
{{- define "railfence.dbCredId" -}}
{{- if .cred -}}{{ printf "%s-%s" .db (kebabcase .cred) }}{{- else -}}{{ .db }}{{- end -}}
{{- end -}}

{{/* The credential's Secret: its existingSecret, or <fullname>-<db>-<cred>-password made by the chart. */}}
{{- define "railfence.dbSecretName" -}}
{{- $cred := include "railfence.dbCred" . | fromJson -}}
{{- if $cred.existingSecret -}}
{{- $cred.existingSecret -}}
{{- else -}}
{{- include "railfence.componentName" (dict "root" .root "component" (printf "%s-password" (include "railfence.dbCredId" .))) -}}
{{- end -}}
{{- end -}}

{{/* True ("true") when the credential has a password file (a Secret exists, is created, or is synced by External Secrets). */}}
{{- define "railfence.dbHasPassword" -}}
{{- $cred := include "railfence.dbCred" . | fromJson -}}
{{- if or $cred.existingSecret $cred.password (dig "externalSecret" "key" "" $cred) -}}true{{- end -}}
{{- end -}}

{{/* Where the credential's password file is mounted (its own directory: one Secret per mount). */}}
{{- define "railfence.dbPasswordFile" -}}
{{- $cred := include "railfence.dbCred" . | fromJson -}}
{{- printf "/var/run/secrets/railfence/%s/%s" (include "railfence.dbCredId" .) $cred.passwordKey -}}
{{- end -}}

{{/* The database URL logged in as the credential's user (the values' URL carries no user). */}}
{{- define "railfence.dbUrl" -}}
{{- $db := index .root.Values.database .db -}}
{{- $cred := include "railfence.dbCred" . | fromJson -}}
{{- regexReplaceAll "^(postgres(ql)?://)" $db.url (printf "${1}%s@" $cred.user) -}}
{{- end -}}

{{/*
Database env for one component: its URL (with its user, without password) and its own password
file. Call with (dict "root" $ "db" "paydb" "cred" "executor" "prefix" "PAYDB").
*/}}
{{- define "railfence.dbEnv" -}}
- name: {{ .prefix }}_URL
  value: {{ include "railfence.dbUrl" . | quote }}
{{- if include "railfence.dbHasPassword" . }}
- name: {{ .prefix }}_PASSWORD_FILE
  value: {{ include "railfence.dbPasswordFile" . }}
{{- end }}
{{- end -}}

{{- define "railfence.dbVolumeMount" -}}
{{- if include "railfence.dbHasPassword" . }}
- name: {{ include "railfence.dbCredId" . }}-password
  mountPath: /var/run/secrets/railfence/{{ include "railfence.dbCredId" . }}
  readOnly: true
{{- end }}
{{- end -}}

{{/* Mounts only the credential's own key of the Secret. */}}
{{- define "railfence.dbVolume" -}}
{{- if include "railfence.dbHasPassword" . }}
{{- $cred := include "railfence.dbCred" . | fromJson }}
- name: {{ include "railfence.dbCredId" . }}-password
  secret:
    secretName: {{ include "railfence.dbSecretName" . }}
    defaultMode: 0440
    items:
      - key: {{ $cred.passwordKey }}
        path: {{ $cred.passwordKey }}
{{- end }}
{{- end -}}

{{/*
Credentials the migration container of one database uses: the owner's ("migrations"), and with
migrations.provisionLogins every component's of that database, whose login roles it creates.
Returns a JSON list of credential keys. Call with (dict "root" $ "db" "paydb").
*/}}
{{- define "railfence.migrateCreds" -}}
{{- if eq .db "raildb" -}}
{{- list "" | toJson -}}
{{- else -}}
{{- $keys := list "migrations" -}}
{{- if .root.Values.migrations.provisionLogins -}}
{{- range $k, $_ := (index .root.Values.database .db).credentials -}}
{{- if ne $k "migrations" }}{{ $keys = append $keys $k }}{{ end -}}
{{- end -}}
{{- end -}}
{{- $keys | toJson -}}
{{- end -}}
{{- end -}}

{{/*
Pod-level security context: identical for every pod, deliberately not configurable.
uid 10001 matches the USER of the image.
*/}}
{{- define "railfence.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "railfence.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
Environment every long-running component shares: bind address, ports, logs, drain bound and
OpenTelemetry. Call with (dict "root" $ "component" "lock" "port" 7100 "metricsPort" 9100 "drainMs" 10000).
OTEL_SERVICE_NAME is the component label, so traces and metrics name the same thing.
*/}}
{{- define "railfence.commonEnv" -}}
- name: HOST
  value: "0.0.0.0"
{{- if .port }}
- name: PORT
  value: {{ .port | quote }}
{{- end }}
- name: METRICS_PORT
  value: {{ .metricsPort | quote }}
- name: LOG_LEVEL
  value: {{ .root.Values.logLevel | quote }}
{{- if .drainMs }}
- name: DRAIN_MS
  value: {{ .drainMs | quote }}
{{- end }}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
{{- with .root.Values.otel }}
{{- if .enabled }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .endpoint | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ .protocol | quote }}
{{- else }}
- name: OTEL_SDK_DISABLED
  value: "true"
{{- end }}
{{- end }}
- name: OTEL_SERVICE_NAME
  value: {{ .component | quote }}
{{- include "railfence.tlsEnv" . }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ include "railfence.otelResourceAttributes" . | quote }}
{{- end -}}

{{- define "railfence.otelResourceAttributes" -}}
{{- $attrs := list (printf "service.namespace=%s" .root.Values.otel.serviceNamespace) (printf "deployment.environment.name=%s" .root.Values.otel.environment) (printf "service.version=%s" .root.Chart.AppVersion) "k8s.namespace.name=$(POD_NAMESPACE)" "k8s.pod.name=$(POD_NAME)" "k8s.node.name=$(NODE_NAME)" -}}
{{- range $k, $v := .root.Values.otel.resourceAttributes -}}
{{- $attrs = append $attrs (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- join "," $attrs -}}
{{- end -}}

{{/* /tmp is the only writable path (read-only root filesystem). */}}
{{- define "railfence.tmpVolumeMount" -}}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{- define "railfence.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end -}}

{{/*
Transport security env (docs/security.md). tls.enabled: every component serves and calls with
mutual TLS from its Secret mounted at /var/run/secrets/railfence/tls. Otherwise the services
serve cleartext h2c, which they refuse on 0.0.0.0 unless ALLOW_INSECURE is explicitly true.
*/}}
{{- define "railfence.tlsEnv" -}}
{{- $t := .root.Values.tls }}
{{- if $t.enabled }}
- name: TLS_CERT_FILE
  value: /var/run/secrets/railfence/tls/tls.crt
- name: TLS_KEY_FILE
  value: /var/run/secrets/railfence/tls/tls.key
- name: TLS_CA_FILE
  value: /var/run/secrets/railfence/tls/ca.crt
- name: TLS_CLIENT_AUTH
  value: {{ $t.clientAuth | quote }}
- name: TLS_RELOAD_INTERVAL_MS
  value: {{ $t.reloadIntervalMs | quote }}
{{- else }}
{{- /* Only reachable with tls.insecureCleartextWithoutIdentities (templates/validate.yaml). */}}
- name: ALLOW_INSECURE
  value: "true"
{{- end }}
{{- end -}}

{{/*
The components that get a certificate, with their identity (docs/security.md) and tls.secrets key.
Returns a JSON list; reconciler, audit and rail-stub only when enabled.
*/}}
{{- define "railfence.tlsComponents" -}}
{{- $list := list (dict "component" "lock" "identity" "lock" "server" true) (dict "component" "rail-proxy" "identity" "rail-proxy" "server" true) (dict "component" "payouts" "identity" "payouts" "server" true) (dict "component" "executor" "identity" "executor" "server" false) -}}
{{- if .Values.reconciler.enabled -}}
{{- $list = append $list (dict "component" "reconciler" "identity" "reconciler" "server" false) -}}
{{- end -}}
{{- if .Values.audit.enabled -}}
{{- $list = append $list (dict "component" "audit" "identity" "auditor" "server" false) -}}
{{- end -}}
{{- if .Values.railStub.enabled -}}
{{- $list = append $list (dict "component" "rail-stub" "identity" "rail" "server" true) -}}
{{- end -}}
{{- $list | toJson -}}
{{- end -}}

{{/*
Where one component's certificate comes from: "external-secret" (tls.externalSecrets.<key>,
synced by External Secrets), "secret" (tls.secrets.<key>, the operator's),
"cert-manager" (tls.certManager.issuerRef.name), else "generated" (the chart's CA).
*/}}
{{- define "railfence.tlsSource" -}}
{{- $key := .component | camelcase | untitle -}}
{{- if index .root.Values.tls.externalSecrets $key | default "" -}}external-secret
{{- else if index .root.Values.tls.secrets $key | default "" -}}secret
{{- else if .root.Values.tls.certManager.issuerRef.name -}}cert-manager
{{- else -}}generated
{{- end -}}
{{- end -}}

{{/*
DNS names of a component's certificate. The first is the identity: the chart's generator
(sprig) cannot write URI SANs, and a certificate without spiffe://railfence/<identity> is read by
its first DNS SAN (services/shared/process/identity.ts). Servers add the names clients dial.
*/}}
{{- define "railfence.tlsDnsNames" -}}
{{- $names := list .identity -}}
{{- if .server -}}
{{- $svc := include "railfence.componentName" (dict "root" .root "component" .component) -}}
{{- $ns := .root.Release.Namespace -}}
{{- $names = concat $names (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns)) -}}
{{- if eq .component "payouts" -}}
{{- $names = concat $names .root.Values.tls.payoutsDnsNames -}}
{{- end -}}
{{- end -}}
{{- $names | toJson -}}
{{- end -}}

{{/*
The chart's own certificates (tls source "generated"), computed once per render and shared by
every template (cached in .Values: the keys are random, a second computation would differ).
Kept across upgrades: the CA is read back from its Secret (lookup) and signs nothing new while
it exists; a component's certificate is re-used while its Secret says it was issued by this CA
for these DNS names (annotation railfence.dev/issued-for), and re-issued otherwise (deleted,
names changed, CA replaced): docs/deploy.md "Rotating certificates". Returns JSON:
{"ca": {crt, key}, "<component>": {crt, key, ca, issuedFor}}, base64 values; {} when nothing is generated.
*/}}
{{- define "railfence.tlsGenerated" -}}
{{- if not (hasKey .Values "__railfenceTlsGenerated") -}}
{{- $out := dict -}}
{{- $need := list -}}
{{- range $c := include "railfence.tlsComponents" . | fromJsonArray -}}
{{- if eq (include "railfence.tlsSource" (dict "root" $ "component" $c.component)) "generated" -}}
{{- $need = append $need $c -}}
{{- end -}}
{{- end -}}
{{- if and .Values.tls.enabled $need -}}
{{- $caSecret := lookup "v1" "Secret" .Release.Namespace (include "railfence.tlsCaSecretName" .) -}}
{{- $ca := dict -}}
{{- if and (dig "data" "tls.crt" "" $caSecret) (dig "data" "tls.key" "" $caSecret) -}}
{{- $ca = buildCustomCert (dig "data" "tls.crt" "" $caSecret) (dig "data" "tls.key" "" $caSecret) -}}
{{- else -}}
{{- $ca = genCA (printf "%s-ca" (include "railfence.fullname" .)) (int .Values.tls.generated.caValidityDays) -}}
{{- end -}}
{{- $caCrt := $ca.Cert | b64enc -}}
{{- $_ := set $out "ca" (dict "crt" $caCrt "key" ($ca.Key | b64enc)) -}}
{{- range $c := $need -}}
{{- $dns := include "railfence.tlsDnsNames" (merge (dict "root" $) $c) | fromJsonArray -}}
{{- $issuedFor := printf "%s|%s" ($ca.Cert | sha256sum) (join "," $dns) | sha256sum | trunc 32 -}}
{{- $existing := lookup "v1" "Secret" $.Release.Namespace (include "railfence.tlsSecretName" (dict "root" $ "component" $c.component)) -}}
{{- if and (eq (dig "metadata" "annotations" "railfence.dev/issued-for" "" $existing) $issuedFor) (dig "data" "tls.crt" "" $existing) (dig "data" "tls.key" "" $existing) -}}
{{- $_ := set $out $c.component (dict "crt" (dig "data" "tls.crt" "" $existing) "key" (dig "data" "tls.key" "" $existing) "ca" $caCrt "issuedFor" $issuedFor) -}}
{{- else -}}
{{- $cert := genSignedCert $c.identity nil $dns (int $.Values.tls.generated.certValidityDays) $ca -}}
{{- $_ := set $out $c.component (dict "crt" ($cert.Cert | b64enc) "key" ($cert.Key | b64enc) "ca" $caCrt "issuedFor" $issuedFor) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $_ := set .Values "__railfenceTlsGenerated" $out -}}
{{- end -}}
{{- index .Values "__railfenceTlsGenerated" | toJson -}}
{{- end -}}

{{/* The chart's CA Secret (generated certificates only). */}}
{{- define "railfence.tlsCaSecretName" -}}
{{- include "railfence.componentName" (dict "root" . "component" "tls-ca") -}}
{{- end -}}

{{/*
Pod annotation for components that read their certificate only at start (clients: executor,
rail-proxy towards the rail): a re-issued chart certificate rolls them on the upgrade that
re-issues it. Servers reload their files without a restart (tls.reloadIntervalMs).
*/}}
{{- define "railfence.tlsRestartAnnotation" -}}
{{- if and .root.Values.tls.enabled (eq (include "railfence.tlsSource" .) "generated") -}}
{{- $generated := include "railfence.tlsGenerated" .root | fromJson -}}
{{- $mine := index $generated .component | default dict -}}
railfence.dev/tls-certificate: {{ $mine.crt | default "" | sha256sum | trunc 16 | quote }}
{{- end -}}
{{- end -}}

{{/* The component's TLS Secret: tls.secrets.<key>, or <fullname>-<component>-tls. */}}
{{- define "railfence.tlsSecretName" -}}
{{- $key := .component | camelcase | untitle -}}
{{- $name := index .root.Values.tls.secrets $key | default "" -}}
{{- if $name -}}{{ $name }}{{- else -}}{{ printf "%s-tls" (include "railfence.componentName" .) }}{{- end -}}
{{- end -}}

{{/* Read-only mount of the TLS Secret (atomic symlink swap on update: the services reload it). */}}
{{- define "railfence.tlsVolumeMount" -}}
{{- if .root.Values.tls.enabled }}
- name: tls
  mountPath: /var/run/secrets/railfence/tls
  readOnly: true
{{- end }}
{{- end -}}

{{- define "railfence.tlsVolume" -}}
{{- if .root.Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ include "railfence.tlsSecretName" . }}
    defaultMode: 0440
    items:
      - {key: tls.crt, path: tls.crt}
      - {key: tls.key, path: tls.key}
      - {key: ca.crt, path: ca.crt}
{{- end }}
{{- end -}}

{{/* Signed fencing tokens are on (tokenSigning.enabled): "true" or "". */}}
{{- define "railfence.tokenSigningOn" -}}
{{- if .Values.tokenSigning.enabled -}}true{{- end -}}
{{- end -}}

{{/* The chart generates the signing key: on, neither existingSecret nor an External Secrets key. "true" or "". */}}
{{- define "railfence.tokenSigningChartKey" -}}
{{- with .Values.tokenSigning -}}
{{- if and .enabled (not .existingSecret) (not (dig "externalSecret" "key" "" .)) -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* The signing key's Secret: tokenSigning.existingSecret, or the chart's <fullname>-token-signing. */}}
{{- define "railfence.tokenSigningSecretName" -}}
{{- if .Values.tokenSigning.existingSecret -}}
{{- .Values.tokenSigning.existingSecret -}}
{{- else -}}
{{- include "railfence.componentName" (dict "root" . "component" "token-signing") -}}
{{- end -}}
{{- end -}}

{{/*
The chart's generated signing key (base64), once per render (cached in .Values like the
certificates): the one in its Secret (lookup), else a new random 64-character key.
*/}}
{{- define "railfence.tokenSigningGenerated" -}}
{{- if not (hasKey .Values "__railfenceTokenKey") -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "railfence.tokenSigningSecretName" .) -}}
{{- $_ := set .Values "__railfenceTokenKey" (dig "data" .Values.tokenSigning.key "" $existing | default (randAlphaNum 64 | b64enc)) -}}
{{- end -}}
{{- index .Values "__railfenceTokenKey" -}}
{{- end -}}

{{/*
Pod annotation of lock and rail-proxy with the chart's own key: a new key (its Secret deleted,
then helm upgrade) rolls both onto it in the same upgrade that installs it into paydb.
*/}}
{{- define "railfence.tokenSigningRestartAnnotation" -}}
{{- if include "railfence.tokenSigningChartKey" . -}}
railfence.dev/token-signing-key: {{ include "railfence.tokenSigningGenerated" . | sha256sum | trunc 16 | quote }}
{{- end -}}
{{- end -}}

{{/* URL scheme of in-cluster gRPC calls. */}}
{{- define "railfence.scheme" -}}
{{- if .Values.tls.enabled }}https{{ else }}http{{ end -}}
{{- end -}}

{{/*
Probes. Cleartext: gRPC probes against grpc.health.v1 on the service port. With TLS: kubelet gRPC
probes cannot do TLS (let alone present a client certificate), so the probes use the plain-HTTP
metrics port: /healthz (process alive) and /readyz (grpc.health.v1 overall status mirrored).
Call with (dict "root" $ "port" 7100 "metricsPort" 9100).
*/}}
{{- define "railfence.probes" -}}
{{- if .root.Values.tls.enabled }}
startupProbe:
  httpGet:
    path: /healthz
    port: metrics
  periodSeconds: 2
  failureThreshold: 30
readinessProbe:
  httpGet:
    path: /readyz
    port: metrics
  periodSeconds: 5
  timeoutSeconds: 2
  failureThreshold: 2
livenessProbe:
  httpGet:
    path: /healthz
    port: metrics
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 3
{{- else }}
{{- include "railfence.grpcProbes" . }}
{{- end }}
{{- end -}}

{{/* gRPC probes against grpc.health.v1 on the service port ("" = the whole server). */}}
{{- define "railfence.grpcProbes" -}}
startupProbe:
  grpc:
    port: {{ .port }}
  periodSeconds: 2
  failureThreshold: 30
readinessProbe:
  grpc:
    port: {{ .port }}
  periodSeconds: 5
  timeoutSeconds: 2
  failureThreshold: 2
livenessProbe:
  grpc:
    port: {{ .port }}
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 3
{{- end -}}

{{/* Scheduling knobs shared by every pod. */}}
{{- define "railfence.scheduling" -}}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{/* Spread replicas across zones and nodes: losing a zone must not take every replica. */}}
{{- define "railfence.topologySpread" -}}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: {{ .root.Values.topology.zoneKey }}
    whenUnsatisfiable: {{ .root.Values.topology.zoneWhenUnsatisfiable }}
    labelSelector:
      matchLabels:
        {{- include "railfence.selectorLabels" . | nindent 8 }}
    matchLabelKeys: ["pod-template-hash"]
  - maxSkew: 1
    topologyKey: {{ .root.Values.topology.hostKey }}
    whenUnsatisfiable: {{ .root.Values.topology.hostWhenUnsatisfiable }}
    labelSelector:
      matchLabels:
        {{- include "railfence.selectorLabels" . | nindent 8 }}
    matchLabelKeys: ["pod-template-hash"]
{{- end -}}

{{/* Grace period above the drain bound: seconds = ceil(boundMs / 1000) + preStop + margin. */}}
{{- define "railfence.graceSeconds" -}}
{{- $boundMs := int .boundMs -}}
{{- $s := div (add $boundMs 999) 1000 -}}
{{- add $s (int .preStop) (int .margin) -}}
{{- end -}}

{{/* The rail rail-proxy calls: the in-cluster stub in development, otherwise rail.url. */}}
{{- define "railfence.railUrl" -}}
{{- if .Values.railStub.enabled -}}
{{- printf "%s://%s:%v" (include "railfence.scheme" .) (include "railfence.componentName" (dict "root" . "component" "rail-stub")) .Values.railStub.port -}}
{{- else -}}
{{- .Values.rail.url -}}
{{- end -}}
{{- end -}}

{{/* In-cluster URLs of the gRPC services (h2c, or https with tls.enabled). */}}
{{- define "railfence.serviceUrl" -}}
{{- printf "%s://%s:%v" (include "railfence.scheme" .root) (include "railfence.componentName" (dict "root" .root "component" .component)) .port -}}
{{- end -}}

{{/*
One migrate container: `node dist/services/migrate/main.js <db>`, logged in as the database's
owner. With migrations.provisionLogins it then creates or updates each component's login role
(LOGIN_<COMPONENT>_USER, LOGIN_<COMPONENT>_PASSWORD_FILE): it mounts those passwords, and is the
only pod that does.
*/}}
{{- define "railfence.migrateContainer" -}}
{{- $root := .root -}}
{{- $db := .db -}}
{{- $owner := dict "root" $root "db" $db "cred" (ternary "" "migrations" (eq $db "raildb")) -}}
- name: migrate-{{ $db }}
  image: {{ include "railfence.image" $root }}
  imagePullPolicy: {{ $root.Values.image.pullPolicy }}
  command: ["node", {{ include "railfence.nodeHeapFlag" .resources | quote }}, "dist/services/migrate/main.js", {{ $db | quote }}]
  env:
    - name: LOG_LEVEL
      value: {{ $root.Values.logLevel | quote }}
    - name: DATABASE_URL
      value: {{ include "railfence.dbUrl" $owner | quote }}
    {{- if include "railfence.dbHasPassword" $owner }}
    - name: DATABASE_PASSWORD_FILE
      value: {{ include "railfence.dbPasswordFile" $owner }}
    {{- end }}
    {{- range $k := include "railfence.migrateCreds" . | fromJsonArray }}
    {{- if and $k (ne $k "migrations") }}
    {{- $login := dict "root" $root "db" $db "cred" $k }}
    {{- $cred := include "railfence.dbCred" $login | fromJson }}
    - name: LOGIN_{{ snakecase $k | upper }}_USER
      value: {{ $cred.user | quote }}
    {{- if include "railfence.dbHasPassword" $login }}
    - name: LOGIN_{{ snakecase $k | upper }}_PASSWORD_FILE
      value: {{ include "railfence.dbPasswordFile" $login }}
    {{- end }}
    {{- end }}
    {{- end }}
    {{- /* Signed tokens: paydb verifies every payout fence with the lock's key (migration 014). */}}
    {{- if and (eq $db "paydb") (include "railfence.tokenSigningOn" $root) }}
    - name: TOKEN_SIGNING_KEY_FILE
      value: /var/run/secrets/railfence/token-signing/{{ $root.Values.tokenSigning.key }}
    {{- end }}
  resources:
    {{- toYaml .resources | nindent 4 }}
  securityContext:
    {{- include "railfence.containerSecurityContext" $root | nindent 4 }}
  volumeMounts:
    {{- include "railfence.tmpVolumeMount" $root | nindent 4 }}
    {{- if and (eq $db "paydb") (include "railfence.tokenSigningOn" $root) }}
    - name: token-signing
      mountPath: /var/run/secrets/railfence/token-signing
      readOnly: true
    {{- end }}
    {{- range $k := include "railfence.migrateCreds" . | fromJsonArray }}
    {{- $ref := dict "root" $root "db" $db "cred" $k }}
    {{- if include "railfence.dbHasPassword" $ref }}
    {{- include "railfence.dbVolumeMount" $ref | nindent 4 }}
    {{- end }}
    {{- end }}
{{- end -}}

{{/* A NetworkPolicy peer from (dict "namespace" "x" "podLabels" {...}). */}}
{{- define "railfence.npNamespacePeer" -}}
- namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: {{ .namespace }}
  {{- with .podLabels }}
  podSelector:
    matchLabels:
      {{- toYaml . | nindent 6 }}
  {{- end }}
{{- end -}}

{{/* Egress every component needs: DNS, PostgreSQL (primary endpoints) and the OTLP collector. */}}
{{- define "railfence.npCommonEgress" -}}
{{- include "railfence.npDnsEgress" . }}
{{- include "railfence.npPostgresEgress" . }}
{{- $np := .Values.networkPolicy -}}
{{- if .Values.otel.enabled }}
- to:
    {{- include "railfence.npNamespacePeer" $np.otlp | nindent 4 }}
    {{- range $np.otlp.cidrs }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  ports:
    - port: {{ $np.otlp.port }}
      protocol: TCP
{{- end }}
{{- end -}}

{{/* Egress to the cluster DNS (names of Services and of the database hosts). */}}
{{- define "railfence.npDnsEgress" -}}
{{- $np := .Values.networkPolicy -}}
- to:
    {{- include "railfence.npNamespacePeer" $np.dns | nindent 4 }}
    {{- range $np.dns.cidrs }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  ports:
    - port: 53
      protocol: UDP
    - port: 53
      protocol: TCP
{{- end -}}

{{/* Egress to PostgreSQL (networkPolicy.postgres: the primaries' addresses). */}}
{{- define "railfence.npPostgresEgress" -}}
{{- $np := .Values.networkPolicy -}}
{{- /* An empty `to` would mean "anywhere": render the rule only with CIDRs (schema: minItems 1). */}}
{{- if $np.postgres.cidrs }}
- to:
    {{- range $np.postgres.cidrs }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  ports:
    - port: {{ $np.postgres.port }}
      protocol: TCP
{{- end }}
{{- end -}}

{{/* Prometheus scrapes the metrics port. Call with (dict "root" $ "port" 9200). */}}
{{- define "railfence.npMonitoringIngress" -}}
- from:
    {{- include "railfence.npNamespacePeer" .root.Values.networkPolicy.monitoring | nindent 4 }}
  ports:
    - port: {{ .port }}
      protocol: TCP
{{- end -}}

{{/*
V8's old-space limit for a container, from (its resources): the memory limit less 96 MiB for the
young generation, code and native memory. Without it V8 sizes its heap from the node's memory and,
with a limit that large, lets the old generation grow several times over between full collections:
the rail-proxy's RSS swung between ~115 and ~170 MB under the same load (docs/decisions/020-node-heap-limit.md).
*/}}
{{- define "railfence.nodeHeapFlag" -}}
{{- $mem := toString (dig "limits" "memory" "" .) -}}
{{- $mi := 0 -}}
{{- if regexMatch "^[0-9]+Mi$" $mem -}}
{{- $mi = trimSuffix "Mi" $mem | int -}}
{{- else if regexMatch "^[0-9]+Gi$" $mem -}}
{{- $mi = mul (trimSuffix "Gi" $mem | int) 1024 -}}
{{- else -}}
{{- fail (printf "resources.limits.memory must be whole Mi or Gi (got %q): the Node heap limit is derived from it" $mem) -}}
{{- end -}}
{{- if lt $mi 160 -}}
{{- fail (printf "resources.limits.memory %s is below 160Mi: a Node service needs 96Mi besides its heap" $mem) -}}
{{- end -}}
--max-old-space-size={{ sub $mi 96 }}
{{- end -}}
