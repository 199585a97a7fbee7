{{/* The chart's name (nameOverride wins). */}}
{{- define "modelevents.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name, the stem of every object name: <release>-<chart>, or the release
name alone when it already holds the chart's name (fullnameOverride wins). */}}
{{- define "modelevents.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "modelevents.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels: name and instance, so that two releases never select each other's pods. */}}
{{- define "modelevents.selectorLabels" -}}
app.kubernetes.io/name: {{ include "modelevents.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The standard labels of every object. */}}
{{- define "modelevents.labels" -}}
helm.sh/chart: {{ include "modelevents.chart" . }}
{{ include "modelevents.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: modelevents
{{- end }}

{{/* Labels and selector labels of one component: (dict "root" $ "component" "worker"). */}}
{{- define "modelevents.componentLabels" -}}
{{ include "modelevents.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- define "modelevents.componentSelector" -}}
{{ include "modelevents.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The Faust app id (consumer group, changelog and internal topic names): per release unless
set, so two releases on one cluster never share a consumer group. */}}
{{- define "modelevents.appId" -}}
{{- default (include "modelevents.fullname" .) .Values.appId }}
{{- end }}

{{/* The topic prefix: per release unless set. */}}
{{- define "modelevents.topicPrefix" -}}
{{- default (printf "%s." (include "modelevents.fullname" .)) .Values.kafka.topicPrefix }}
{{- end }}

{{- define "modelevents.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{- define "modelevents.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "modelevents.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The pipeline's settings for every container (the release's ConfigMap, set inline: the
topics hook runs before the release's objects exist) and the Kafka credentials Secret. */}}
{{- define "modelevents.kafkaEnv" -}}
- {name: KAFKA_BOOTSTRAP_SERVERS, value: {{ .Values.kafka.bootstrapServers | quote }}}
- {name: MODELEVENTS_TOPIC_PREFIX, value: {{ include "modelevents.topicPrefix" . | quote }}}
- {name: MODELEVENTS_PARTITIONS, value: {{ .Values.kafka.partitions | quote }}}
- {name: MODELEVENTS_APP_ID, value: {{ include "modelevents.appId" . | quote }}}
- {name: MODELEVENTS_REPLICATION_FACTOR, value: {{ .Values.kafka.replicationFactor | quote }}}
{{- if .Values.kafka.minInsyncReplicas }}
- {name: MODELEVENTS_MIN_INSYNC_REPLICAS, value: {{ .Values.kafka.minInsyncReplicas | quote }}}
{{- end }}
- {name: KAFKA_SECURITY_PROTOCOL, value: {{ .Values.kafka.securityProtocol | quote }}}
{{- with .Values.kafka.sasl.mechanism }}
- {name: KAFKA_SASL_MECHANISM, value: {{ . | quote }}}
{{- end }}
{{- with .Values.kafka.sasl.username }}
- {name: KAFKA_SASL_USERNAME, value: {{ . | quote }}}
{{- end }}
{{- if .Values.kafka.sasl.passwordSecret }}
- {name: KAFKA_SASL_PASSWORD_FILE, value: {{ printf "%s/sasl/%s" (include "modelevents.kafkaSecretsDir" .) .Values.kafka.sasl.passwordKey | quote }}}
{{- end }}
{{- if .Values.kafka.tls.caSecret }}
- {name: KAFKA_SSL_CAFILE, value: {{ printf "%s/ca/%s" (include "modelevents.kafkaSecretsDir" .) .Values.kafka.tls.caKey | quote }}}
{{- end }}
{{- if .Values.kafka.tls.clientSecret }}
- {name: KAFKA_SSL_CERTFILE, value: {{ printf "%s/client/%s" (include "modelevents.kafkaSecretsDir" .) .Values.kafka.tls.certKey | quote }}}
- {name: KAFKA_SSL_KEYFILE, value: {{ printf "%s/client/%s" (include "modelevents.kafkaSecretsDir" .) .Values.kafka.tls.keyKey | quote }}}
{{- with .Values.kafka.tls.keyPasswordKey }}
- {name: KAFKA_SSL_PASSWORD_FILE, value: {{ printf "%s/client/%s" (include "modelevents.kafkaSecretsDir" $) . | quote }}}
{{- end }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The Kafka secrets mounted as files (SASL password, CA bundle, client certificate): the
volumes and the mounts of every container that talks to Kafka. */}}
{{- define "modelevents.kafkaSecretsDir" -}}/etc/modelevents/kafka{{- end }}

{{- define "modelevents.kafkaSecretVolumes" -}}
{{- $sasl := .Values.kafka.sasl }}
{{- $tls := .Values.kafka.tls }}
{{- if $sasl.passwordSecret }}
- name: kafka-sasl
  secret:
    secretName: {{ $sasl.passwordSecret | quote }}
    items: [{key: {{ $sasl.passwordKey | quote }}, path: {{ $sasl.passwordKey | quote }}}]
    defaultMode: 0440
{{- end }}
{{- if $tls.caSecret }}
- name: kafka-ca
  secret:
    secretName: {{ $tls.caSecret | quote }}
    items: [{key: {{ $tls.caKey | quote }}, path: {{ $tls.caKey | quote }}}]
    defaultMode: 0440
{{- end }}
{{- if $tls.clientSecret }}
- name: kafka-client
  secret:
    secretName: {{ $tls.clientSecret | quote }}
    items:
      - {key: {{ $tls.certKey | quote }}, path: {{ $tls.certKey | quote }}}
      - {key: {{ $tls.keyKey | quote }}, path: {{ $tls.keyKey | quote }}}
      {{- with $tls.keyPasswordKey }}
      - {key: {{ . | quote }}, path: {{ . | quote }}}
      {{- end }}
    defaultMode: 0440
{{- end }}
{{- end }}

{{- define "modelevents.kafkaSecretMounts" -}}
{{- $dir := include "modelevents.kafkaSecretsDir" . }}
{{- if .Values.kafka.sasl.passwordSecret }}
- {name: kafka-sasl, mountPath: {{ printf "%s/sasl" $dir | quote }}, readOnly: true}
{{- end }}
{{- if .Values.kafka.tls.caSecret }}
- {name: kafka-ca, mountPath: {{ printf "%s/ca" $dir | quote }}, readOnly: true}
{{- end }}
{{- if .Values.kafka.tls.clientSecret }}
- {name: kafka-client, mountPath: {{ printf "%s/client" $dir | quote }}, readOnly: true}
{{- end }}
{{- end }}

{{- define "modelevents.kafkaEnvFrom" -}}
{{- if .Values.kafka.existingSecret -}}
- secretRef: {name: {{ .Values.kafka.existingSecret | quote }}}
{{- end }}
{{- end }}

{{/* Pod-level settings shared by every pod of the chart. */}}
{{- define "modelevents.podSpecCommon" -}}
serviceAccountName: {{ include "modelevents.serviceAccountName" . }}
automountServiceAccountToken: false
{{- with .Values.image.pullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
securityContext: {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end }}
