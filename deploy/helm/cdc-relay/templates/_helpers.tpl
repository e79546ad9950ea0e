{{/* Names and labels. */}}
{{- define "cdc-relay.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "cdc-relay.fullname" -}}
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

{{- define "cdc-relay.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cdc-relay.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "cdc-relay.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "cdc-relay.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
The relay pairs to render, as JSON: one per shard (shards: N renders N, each named
<fullname>-s<I>of<N> with `run --shard I/N`, so each has its own slot <slot>_s<I>of<N> and with
it its own standby lock, transactional id and metrics), or the one unsharded pair (shards: 0),
named and labelled as before shards existed. label is the pair's cdc-relay/shard label ("" for
the unsharded one).
*/}}
{{- define "cdc-relay.pairs" -}}
{{- $n := int .Values.shards -}}
{{- if or (lt $n 0) (gt $n 64) -}}
{{- fail (printf "shards %d: want 0 (not sharded) or 1 to 64" $n) -}}
{{- end -}}
{{- $full := include "cdc-relay.fullname" . -}}
{{- $out := list -}}
{{- if eq $n 0 -}}
{{- $out = append $out (dict "name" $full "shard" "" "label" "" "index" 0) -}}
{{- else -}}
{{- range $i := until $n -}}
{{- $label := printf "s%dof%d" $i $n -}}
{{- $name := printf "%s-%s" ($full | trunc (int (sub 62 (len $label))) | trimSuffix "-") $label -}}
{{- $out = append $out (dict "name" $name "shard" (printf "%d/%d" $i $n) "label" $label "index" $i) -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* The selector labels of one pair's pods: the release's, and the shard's when sharded. */}}
{{- define "cdc-relay.pairSelectorLabels" -}}
{{ include "cdc-relay.selectorLabels" .root }}
{{- with .pair.label }}
cdc-relay/shard: {{ . }}
{{- end }}
{{- end -}}

{{- define "cdc-relay.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "cdc-relay.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "cdc-relay.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Where each secret is mounted. */}}
{{- define "cdc-relay.secretDir" -}}
{{- printf "/etc/cdc-relay/secrets/%s" . -}}
{{- end -}}

{{/*
A value as its flag reads it: YAML numbers arrive as float64, which toString would print as
2.147483648e+09, so whole numbers are printed as integers. nil is "".
*/}}
{{- define "cdc-relay.envValue" -}}
{{- if kindIs "invalid" . -}}
{{- else if and (kindIs "float64" .) (eq (float64 (int64 .)) .) -}}{{- int64 . -}}
{{- else -}}{{- toString . -}}
{{- end -}}
{{- end -}}

{{/* relay.NAME as its flag reads it, "" when unset. */}}
{{- define "cdc-relay.flag" -}}
{{- include "cdc-relay.envValue" (index .root.Values.relay .name) -}}
{{- end -}}

{{/*
pg-url as the relay gets it: refused when it holds a password, and with secrets.pgTLS the
certificate files appended (sslrootcert, sslcert, sslkey; sslmode=verify-full unless it has one).
*/}}
{{- define "cdc-relay.pgURL" -}}
{{- $u := required "relay.pg-url is required: postgres://user@host:5432/db (see values.yaml)" (include "cdc-relay.flag" (dict "root" . "name" "pg-url")) -}}
{{- if or (regexMatch "^[a-zA-Z]+://[^/@?]*:[^/@?]*@" $u) (regexMatch "(^|[\\s?&])password=" $u) -}}
{{- fail "relay.pg-url holds a password: take it out and put it in a Secret named by secrets.pgPassword.secretName (mounted as --pg-password-file)" -}}
{{- end -}}
{{- with .Values.secrets.pgTLS -}}
{{- if .secretName -}}
{{- if regexMatch "(^|[\\s?&])sslrootcert=" $u -}}
{{- fail "relay.pg-url sets sslrootcert and secrets.pgTLS mounts a CA: use one of them" -}}
{{- end -}}
{{- $dir := include "cdc-relay.secretDir" "pg-tls" -}}
{{- $p := list (printf "sslrootcert=%s/%s" $dir .caKey) -}}
{{- if not (regexMatch "(^|[\\s?&])sslmode=" $u) -}}{{- $p = prepend $p "sslmode=verify-full" -}}{{- end -}}
{{- if or .certKey .keyKey -}}
{{- if not (and .certKey .keyKey) -}}{{- fail "secrets.pgTLS: set both certKey and keyKey for a client certificate, or neither" -}}{{- end -}}
{{- $p = append $p (printf "sslcert=%s/%s" $dir .certKey) -}}
{{- $p = append $p (printf "sslkey=%s/%s" $dir .keyKey) -}}
{{- end -}}
{{- if regexMatch "^postgres(ql)?://" $u -}}
{{- printf "%s%s%s" $u (ternary "&" "?" (contains "?" $u)) (join "&" $p) -}}
{{- else -}}
{{- printf "%s %s" $u (join " " $p) -}}{{/* keyword/value form: host=... user=... */}}
{{- end -}}
{{- else -}}
{{- $u -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The environment twins of the secret files, shared by the relay and the slot Job (pg only). */}}
{{- define "cdc-relay.pgSecretEnv" -}}
{{- with .Values.secrets.pgPassword }}{{ if .secretName }}
- name: CDC_RELAY_PG_PASSWORD_FILE
  value: {{ printf "%s/%s" (include "cdc-relay.secretDir" "pg-password") .key | quote }}
{{- end }}{{ end }}
{{- end -}}

{{- define "cdc-relay.kafkaSecretEnv" -}}
{{- with .Values.secrets.kafkaPassword }}{{ if .secretName }}
- name: CDC_RELAY_KAFKA_PASSWORD_FILE
  value: {{ printf "%s/%s" (include "cdc-relay.secretDir" "kafka-password") .key | quote }}
{{- end }}{{ end }}
{{- with .Values.secrets.kafkaTLS }}{{ if .secretName }}
{{- $dir := include "cdc-relay.secretDir" "kafka-tls" }}
- name: CDC_RELAY_KAFKA_CA_FILE
  value: {{ printf "%s/%s" $dir .caKey | quote }}
{{- if or .certKey .keyKey }}
{{- if not (and .certKey .keyKey) }}{{ fail "secrets.kafkaTLS: set both certKey and keyKey for a client certificate, or neither" }}{{ end }}
- name: CDC_RELAY_KAFKA_CERT_FILE
  value: {{ printf "%s/%s" $dir .certKey | quote }}
- name: CDC_RELAY_KAFKA_KEY_FILE
  value: {{ printf "%s/%s" $dir .keyKey | quote }}
{{- end }}
{{- end }}{{ end }}
{{- end -}}

{{/* Secret volumes and their mounts: name -> values key. */}}
{{- define "cdc-relay.secretList" -}}
{{- $out := list -}}
{{- range $dir, $key := dict "pg-password" "pgPassword" "pg-tls" "pgTLS" "kafka-password" "kafkaPassword" "kafka-tls" "kafkaTLS" -}}
{{- $s := index $.Values.secrets $key -}}
{{- if $s.secretName -}}{{- $out = append $out (dict "dir" $dir "secretName" $s.secretName) -}}{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{- define "cdc-relay.secretVolumes" -}}
{{- range (include "cdc-relay.secretList" .root | fromJsonArray) }}
{{- if or (not $.only) (has .dir $.only) }}
- name: {{ .dir }}
  secret:
    secretName: {{ .secretName }}
    defaultMode: 0440
{{- end }}
{{- end }}
{{- end -}}

{{- define "cdc-relay.secretMounts" -}}
{{- range (include "cdc-relay.secretList" .root | fromJsonArray) }}
{{- if or (not $.only) (has .dir $.only) }}
- name: {{ .dir }}
  mountPath: {{ include "cdc-relay.secretDir" .dir }}
  readOnly: true
{{- end }}
{{- end }}
{{- end -}}
