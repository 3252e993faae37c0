{{- define "cognis.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "cognis.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "cognis.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "cognis.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "cognis.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/name: {{ include "cognis.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* selector labels of one component: (dict "root" $ "component" "api") */}}
{{- define "cognis.selector" -}}
app.kubernetes.io/name: {{ include "cognis.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "cognis.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "cognis.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "cognis.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "cognis.secretName" -}}
{{- .Values.secrets.existingSecret | default (include "cognis.fullname" .) -}}
{{- end -}}

{{- define "cognis.embeddingUrl" -}}
{{- if .Values.embedder.enabled -}}
http://{{ include "cognis.fullname" . }}-embedder:{{ .Values.embedder.port }}/v1
{{- else -}}
{{- required "embedding.httpUrl is required when embedder.enabled is false" .Values.embedding.httpUrl -}}
{{- end -}}
{{- end -}}

{{/* one env entry from the Secret: (dict "root" $ "name" "COGNIS_X" "key" "x") */}}
{{- define "cognis.secretEnv" -}}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ include "cognis.secretName" .root }}
      key: {{ .key }}
{{- end -}}

{{/* The keys the Secret holds, as JSON: database-url and, of the chart's own Secret, each
     value given; of an existing Secret, those secrets.existingSecretKeys lists. A pod is given
     only keys that are there, so no reference is optional and none is guessed. */}}
{{- define "cognis.secretKeys" -}}
{{- $s := .Values.secrets }}
{{- $keys := list "database-url" }}
{{- if $s.existingSecret }}
{{- $keys = concat $keys $s.existingSecretKeys }}
{{- else }}
{{- range $key, $value := dict "worker-database-url" $s.workerDatabaseUrl "migration-database-url" $s.migrationDatabaseUrl "read-database-url" $s.readDatabaseUrl "api-key-hashes" $s.apiKeyHashes "admin-key-hashes" $s.adminKeyHashes "opensearch-password" $s.opensearchPassword "embedding-http-api-key" $s.embeddingHttpApiKey "llm-api-key" $s.llmApiKey }}
{{- if $value }}
{{- $keys = append $keys $key }}
{{- end }}
{{- end }}
{{- end }}
{{- $keys | uniq | toJson }}
{{- end -}}

{{/* env entries of those (name key) pairs the Secret holds: (dict "root" $ "pairs" (list ...)) */}}
{{- define "cognis.secretEnvs" -}}
{{- $held := include "cognis.secretKeys" .root | fromJsonArray }}
{{- range $pair := .pairs }}
{{- if has (index $pair 1) $held }}
{{ include "cognis.secretEnv" (dict "root" $.root "name" (index $pair 0) "key" (index $pair 1)) }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The Secret key a process connects with when it needs one role only: `role`'s key when the
     Secret holds it, else database-url (whose role then has to do): (dict "root" $ "key" "x") */}}
{{- define "cognis.ownUrl" -}}
{{- $held := include "cognis.secretKeys" .root | fromJsonArray }}
{{- if has .key $held }}{{ .key }}{{ else }}database-url{{ end }}
{{- end -}}

{{/* The embedding client's settings, shared by every process that embeds; `key`: with the
     model service's key (those that embed; the relay only names the endpoint). */}}
{{- define "cognis.embeddingEnv" -}}
{{- $root := .root }}
- name: COGNIS_EMBEDDING_BACKEND
  value: http
- name: COGNIS_EMBEDDING_HTTP_URL
  value: {{ include "cognis.embeddingUrl" $root | quote }}
{{- with $root.Values.embedding.model }}
- name: COGNIS_EMBEDDING_HTTP_MODEL
  value: {{ . | quote }}
{{- end }}
{{- if .key }}
{{- include "cognis.secretEnvs" (dict "root" $root "pairs" (list (list "COGNIS_EMBEDDING_HTTP_API_KEY" "embedding-http-api-key"))) }}
{{- end }}
{{- end -}}

{{/* The optional LLM (ingestion; in the API: dry runs and the category judge of direct writes). */}}
{{- define "cognis.llmEnv" -}}
{{- with .Values.llm.baseUrl }}
- name: COGNIS_LLM_BASE_URL
  value: {{ . | quote }}
{{- end }}
{{- with .Values.llm.model }}
- name: COGNIS_LLM_MODEL
  value: {{ . | quote }}
{{- end }}
{{- include "cognis.secretEnvs" (dict "root" . "pairs" (list (list "COGNIS_LLM_API_KEY" "llm-api-key"))) }}
{{- end -}}

{{/* Traces (docs/observability/tracing.md): the standard OTEL_* variables, none while off. */}}
{{- define "cognis.tracingEnv" -}}
{{- with .Values.tracing.otlpEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
- name: OTEL_TRACES_SAMPLER
  value: parentbased_traceidratio
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ $.Values.tracing.sampleRatio | quote }}
{{- end }}
{{- if .Values.tracing.content }}
- name: COGNIS_TRACE_CONTENT
  value: "true"
{{- end }}
{{- end -}}

{{/* What every process that opens the stores shares (as in compose.yaml), no secret in it. */}}
{{- define "cognis.commonEnv" -}}
- name: COGNIS_HOST
  value: "0.0.0.0"
- name: COGNIS_PORT
  value: {{ .Values.api.port | quote }}
- name: COGNIS_LOG_JSON
  value: "true"
- name: COGNIS_LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: COGNIS_RELAY_IN_API
  value: "false"
- name: COGNIS_INGEST_WORKER_IN_API
  value: "false"
- name: COGNIS_OPENSEARCH_URL
  value: {{ required "opensearch.url is required" .Values.opensearch.url | quote }}
- name: COGNIS_OPENSEARCH_INDEX
  value: {{ .Values.opensearch.index | quote }}
{{- with .Values.opensearch.username }}
- name: COGNIS_OPENSEARCH_USERNAME
  value: {{ . | quote }}
{{- end }}
{{- if not (kindIs "invalid" .Values.opensearch.replicas) }}
- name: COGNIS_OPENSEARCH_REPLICAS
  value: {{ .Values.opensearch.replicas | quote }}
{{- end }}
- name: HF_HOME
  value: /tmp/hf
{{- with include "cognis.tracingEnv" . | trim }}
{{ . }}
{{- end }}
{{- range $name, $value := .Values.extraEnv }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{/* Each process's environment: only the credentials it uses (README "Secrets per pod").
     api: the request role, the replica, the worker role (the index coverage check and dry
     runs read across tenants), the key hashes, OpenSearch, the model service, the LLM when
     llm.inApi. relay: the worker role alone, OpenSearch. worker: the worker role alone,
     OpenSearch, the model service, the LLM. migrate: the owner alone. */}}
{{- define "cognis.env" -}}
{{- $root := .root }}
{{- $process := .process }}
{{- include "cognis.commonEnv" $root }}
{{- if eq $process "api" }}
{{- include "cognis.secretEnvs" (dict "root" $root "pairs" (list (list "COGNIS_DATABASE_URL" "database-url") (list "COGNIS_READ_DATABASE_URL" "read-database-url") (list "COGNIS_WORKER_DATABASE_URL" "worker-database-url") (list "COGNIS_API_KEY_HASHES" "api-key-hashes") (list "COGNIS_ADMIN_KEY_HASHES" "admin-key-hashes") (list "COGNIS_OPENSEARCH_PASSWORD" "opensearch-password"))) }}
{{- include "cognis.embeddingEnv" (dict "root" $root "key" true) }}
{{- if $root.Values.llm.inApi }}
{{- include "cognis.llmEnv" $root }}
{{- end }}
{{- else if eq $process "migrate" }}
{{- include "cognis.secretEnvs" (dict "root" $root "pairs" (list (list "COGNIS_DATABASE_URL" (include "cognis.ownUrl" (dict "root" $root "key" "migration-database-url"))))) }}
{{- else }}
{{- /* relay, worker: the worker role as their only database URL (the background engine is then the same) */}}
{{- include "cognis.secretEnvs" (dict "root" $root "pairs" (list (list "COGNIS_DATABASE_URL" (include "cognis.ownUrl" (dict "root" $root "key" "worker-database-url"))) (list "COGNIS_OPENSEARCH_PASSWORD" "opensearch-password"))) }}
- name: COGNIS_HEARTBEAT_DIR
  value: /tmp/heartbeat
- name: COGNIS_HEARTBEAT_MAX_AGE_S
  value: {{ $root.Values.heartbeat.maxAgeSeconds | quote }}
{{- include "cognis.embeddingEnv" (dict "root" $root "key" (eq $process "worker")) }}
{{- if eq $process "worker" }}
{{- include "cognis.llmEnv" $root }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Pod-level settings shared by every workload. */}}
{{- define "cognis.podSpec" -}}
automountServiceAccountToken: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  - name: tmp
    emptyDir: {}
{{- end -}}

{{- define "cognis.containerCommon" -}}
image: {{ include "cognis.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
securityContext:
  {{- toYaml .Values.securityContext | nindent 2 }}
volumeMounts:
  - name: tmp
    mountPath: /tmp
{{- end -}}

{{/* Pods of one component spread over zones and nodes: (dict "root" $ "component" "api"). */}}
{{- define "cognis.spread" -}}
{{- $spread := .root.Values.topologySpread }}
{{- if $spread.enabled }}
topologySpreadConstraints:
{{- range $key := $spread.topologyKeys }}
  - maxSkew: {{ $spread.maxSkew }}
    topologyKey: {{ $key }}
    whenUnsatisfiable: {{ $spread.whenUnsatisfiable }}
    labelSelector:
      matchLabels:
        {{- include "cognis.selector" $ | nindent 8 }}
{{- end }}
{{- end }}
{{- end -}}
