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

{{/* one env entry from the Secret: (dict "root" $ "name" "COGNIS_X" "key" "x" "optional" true) */}}
{{- define "cognis.secretEnv" -}}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ include "cognis.secretName" .root }}
      key: {{ .key }}
      {{- if .optional }}
      optional: true
      {{- end }}
{{- end -}}

{{/* The embedding client's settings, shared by every process that embeds. */}}
{{- define "cognis.embeddingEnv" -}}
- name: COGNIS_EMBEDDING_BACKEND
  value: http
- name: COGNIS_EMBEDDING_HTTP_URL
  value: {{ include "cognis.embeddingUrl" . | quote }}
{{- with .Values.embedding.model }}
- name: COGNIS_EMBEDDING_HTTP_MODEL
  value: {{ . | quote }}
{{- end }}
{{ include "cognis.secretEnv" (dict "root" . "name" "COGNIS_EMBEDDING_HTTP_API_KEY" "key" "embedding-http-api-key" "optional" true) }}
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

{{/* The environment of the API, the relay, the workers and the migration Job (as in compose.yaml). */}}
{{- define "cognis.env" -}}
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
{{- with .Values.llm.baseUrl }}
- name: COGNIS_LLM_BASE_URL
  value: {{ . | quote }}
{{- end }}
{{- with .Values.llm.model }}
- name: COGNIS_LLM_MODEL
  value: {{ . | quote }}
{{- end }}
- name: HF_HOME
  value: /tmp/hf
{{ include "cognis.secretEnv" (dict "root" . "name" "COGNIS_DATABASE_URL" "key" "database-url") }}
{{ include "cognis.secretEnv" (dict "root" . "name" "COGNIS_WORKER_DATABASE_URL" "key" "worker-database-url" "optional" true) }}
{{ include "cognis.secretEnv" (dict "root" . "name" "COGNIS_MIGRATION_DATABASE_URL" "key" "migration-database-url" "optional" true) }}
{{ include "cognis.secretEnv" (dict "root" . "name" "COGNIS_READ_DATABASE_URL" "key" "read-database-url" "optional" true) }}
{{ include "cognis.secretEnv" (dict "root" . "name" "COGNIS_API_KEY_HASHES" "key" "api-key-hashes" "optional" true) }}
{{ include "cognis.secretEnv" (dict "root" . "name" "COGNIS_ADMIN_KEY_HASHES" "key" "admin-key-hashes" "optional" true) }}
{{ include "cognis.secretEnv" (dict "root" . "name" "COGNIS_OPENSEARCH_PASSWORD" "key" "opensearch-password" "optional" true) }}
{{ include "cognis.secretEnv" (dict "root" . "name" "COGNIS_LLM_API_KEY" "key" "llm-api-key" "optional" true) }}
{{ include "cognis.embeddingEnv" . }}
{{- with include "cognis.tracingEnv" . | trim }}
{{ . }}
{{- end }}
{{- range $name, $value := .Values.extraEnv }}
- name: {{ $name }}
  value: {{ $value | quote }}
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
