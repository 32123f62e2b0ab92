{{/* Names, labels and shared snippets. */}}

{{- define "gatehouse.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gatehouse.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gatehouse.controlPlane.fullname" -}}
{{- printf "%s-control-plane" (include "gatehouse.fullname" .) -}}
{{- end -}}

{{- define "gatehouse.dataPlane.fullname" -}}
{{- printf "%s-data-plane" (include "gatehouse.fullname" .) -}}
{{- end -}}

{{- define "gatehouse.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "gatehouse.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gatehouse
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "control-plane") */}}
{{- define "gatehouse.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gatehouse.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "gatehouse.componentLabels" -}}
{{ include "gatehouse.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "gatehouse.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "gatehouse.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gatehouse.controlPlane.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "gatehouse.adminSecretName" -}}
{{- default (printf "%s-admin" (include "gatehouse.fullname" .)) .Values.admin.existingSecret -}}
{{- end -}}

{{- define "gatehouse.joinTokenSecretName" -}}
{{- default (printf "%s-join-token" (include "gatehouse.fullname" .)) .Values.grpcJoinToken.existingSecret -}}
{{- end -}}

{{- define "gatehouse.keyAuthHashKeySecretName" -}}
{{- default (printf "%s-key-auth-hash-key" (include "gatehouse.fullname" .)) .Values.keyAuthHashKey.existingSecret -}}
{{- end -}}

{{/* GRPC_JOIN_TOKEN from the join-token Secret, for both sides. */}}
{{- define "gatehouse.joinTokenEnv" -}}
{{- if .Values.grpcJoinToken.enabled -}}
- name: GRPC_JOIN_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "gatehouse.joinTokenSecretName" . }}
      key: {{ .Values.grpcJoinToken.key }}
{{- end -}}
{{- end -}}

{{- define "gatehouse.grpcCaSecretName" -}}
{{- printf "%s-grpc-ca" (include "gatehouse.fullname" .) -}}
{{- end -}}

{{- define "gatehouse.controlPlane.tlsSecretName" -}}
{{- if eq .Values.grpcTls.source "existingSecret" -}}
{{- required "grpcTls.existingSecret.controlPlane is required when grpcTls.source is existingSecret" .Values.grpcTls.existingSecret.controlPlane -}}
{{- else -}}
{{- printf "%s-tls" (include "gatehouse.controlPlane.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "gatehouse.dataPlane.tlsSecretName" -}}
{{- if eq .Values.grpcTls.source "existingSecret" -}}
{{- required "grpcTls.existingSecret.dataPlane is required when grpcTls.source is existingSecret" .Values.grpcTls.existingSecret.dataPlane -}}
{{- else -}}
{{- printf "%s-tls" (include "gatehouse.dataPlane.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* DNS names of the control-plane Service; the control-plane certificate names all of them. */}}
{{- define "gatehouse.controlPlane.dnsNames" -}}
{{- $svc := include "gatehouse.controlPlane.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.clusterDomain) | toJson -}}
{{- end -}}

{{/* What a data plane dials: the Service's fully qualified name (in the certificate) and its gRPC port. */}}
{{- define "gatehouse.controlPlane.grpcAddress" -}}
{{- printf "%s.%s.svc.%s:%d" (include "gatehouse.controlPlane.fullname" .) .Release.Namespace .Values.clusterDomain (int .Values.controlPlane.service.grpcPort) -}}
{{- end -}}

{{/* Mount point of the gRPC TLS Secret and the GRPC_TLS_* variables that point into it. */}}
{{- define "gatehouse.tlsMountPath" -}}/etc/gatehouse/tls{{- end -}}
{{- define "gatehouse.proxyTlsMountPath" -}}/etc/gatehouse/proxy-tls{{- end -}}

{{- define "gatehouse.tlsEnv" -}}
- name: GRPC_TLS_CERT
  value: {{ include "gatehouse.tlsMountPath" . }}/tls.crt
- name: GRPC_TLS_KEY
  value: {{ include "gatehouse.tlsMountPath" . }}/tls.key
- name: GRPC_TLS_CA
  value: {{ include "gatehouse.tlsMountPath" . }}/ca.crt
{{- end -}}

{{/* OpenTelemetry export of both services (tracing.*); nothing without an endpoint. */}}
{{- define "gatehouse.tracingEnv" -}}
{{- with .Values.tracing -}}
{{- if .endpoint -}}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .endpoint | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ .protocol | quote }}
- name: OTEL_TRACES_SAMPLER
  value: {{ .sampler | quote }}
{{- if .samplerArg }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ .samplerArg | quote }}
{{- end }}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Container ports: fixed inside the pod, set explicitly through the services' variables. */}}
{{- define "gatehouse.port.admin" -}}8081{{- end -}}
{{- define "gatehouse.port.grpc" -}}8082{{- end -}}
{{- define "gatehouse.port.proxy" -}}8080{{- end -}}
{{- define "gatehouse.port.status" -}}8083{{- end -}}
{{- define "gatehouse.port.redirect" -}}8088{{- end -}}
{{- define "gatehouse.port.gatewayHttps" -}}8443{{- end -}}

{{/* Pod annotations: Prometheus scrape hints (metrics.podAnnotations) plus the component's own. (dict "root" $ "port" N "extra" map) */}}
{{- define "gatehouse.podAnnotations" -}}
{{- $annotations := dict -}}
{{- if .root.Values.metrics.podAnnotations -}}
{{- $_ := set $annotations "prometheus.io/scrape" "true" -}}
{{- $_ := set $annotations "prometheus.io/port" (toString .port) -}}
{{- $_ := set $annotations "prometheus.io/path" "/metrics" -}}
{{- end -}}
{{- $annotations = merge (deepCopy (.extra | default dict)) $annotations -}}
{{- with $annotations -}}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}

{{/* affinity of a component: the given one, else a soft spread of its replicas over nodes. (dict "root" $ "component" c "affinity" map) */}}
{{- define "gatehouse.affinity" -}}
{{- if .affinity -}}
{{- toYaml .affinity -}}
{{- else -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "gatehouse.selectorLabels" (dict "root" .root "component" .component) | nindent 12 }}
{{- end -}}
{{- end -}}

{{/* Seconds in a duration as the services read it ("500ms", "10s", "1m30s"; values.schema.json checks the form). */}}
{{- define "gatehouse.durationSeconds" -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "(\\d+(\\.\\d*)?|\\.\\d+)(ms|s|m|h)" . -1 -}}
{{- $number := regexFind "^(\\d+(\\.\\d*)?|\\.\\d+)" . -}}
{{- $unit := trimPrefix $number . -}}
{{- $total = addf $total (mulf (float64 $number) (get (dict "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0) $unit)) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/* Checks that JSON Schema cannot express. */}}
{{- define "gatehouse.validate" -}}
{{- range $component := list "controlPlane" "dataPlane" -}}
{{- $v := index $.Values $component -}}
{{- $delay := float64 (include "gatehouse.durationSeconds" (default "0s" $v.shutdownDelay)) -}}
{{- $drain := addf (float64 (include "gatehouse.durationSeconds" $v.shutdownTimeout)) (float64 (default 0 $v.preStopSleepSeconds)) $delay -}}
{{- if le (float64 $v.terminationGracePeriodSeconds) $drain -}}
{{- fail (printf "%s.terminationGracePeriodSeconds (%d) must be greater than the %s s a graceful stop may take (preStopSleepSeconds + shutdownDelay + shutdownTimeout %s): the kubelet would kill the pod mid-drain" $component (int $v.terminationGracePeriodSeconds) (toString $drain) $v.shutdownTimeout) -}}
{{- end -}}
{{- end -}}
{{- $as := .Values.dataPlane.autoscaling -}}
{{- if and $as.enabled (gt (int $as.minReplicas) (int $as.maxReplicas)) -}}
{{- fail (printf "dataPlane.autoscaling.minReplicas (%d) must not be greater than dataPlane.autoscaling.maxReplicas (%d)" (int $as.minReplicas) (int $as.maxReplicas)) -}}
{{- end -}}
{{- if and .Values.dataPlane.service.nodePort (eq .Values.dataPlane.service.type "ClusterIP") -}}
{{- fail "dataPlane.service.nodePort needs dataPlane.service.type NodePort or LoadBalancer" -}}
{{- end -}}
{{- if and .Values.dataPlane.service.externalTrafficPolicy (eq .Values.dataPlane.service.type "ClusterIP") -}}
{{- fail "dataPlane.service.externalTrafficPolicy needs dataPlane.service.type NodePort or LoadBalancer" -}}
{{- end -}}
{{- if and (not .Values.controlPlane.leaderElection.enabled) (gt (int .Values.controlPlane.replicas) 1) -}}
{{- fail (printf "controlPlane.leaderElection.enabled=false allows one control-plane replica only (controlPlane.replicas is %d): every replica would write status" (int .Values.controlPlane.replicas)) -}}
{{- end -}}
{{- end -}}
