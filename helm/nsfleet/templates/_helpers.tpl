{{/* vim: set filetype=mustache: */}}

{{/* Chart name, truncated to a DNS label. */}}
{{- define "nsfleet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name prefix for every resource. Truncated to 50 characters so that
suffixes such as "-redis" and the StatefulSet's pod/PVC names stay within limits.
*/}}
{{- define "nsfleet.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "nsfleet.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels shared by every object of the release. */}}
{{- define "nsfleet.labels" -}}
helm.sh/chart: {{ include "nsfleet.chart" . }}
app.kubernetes.io/name: {{ include "nsfleet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: nsfleet
{{- end }}

{{- define "nsfleet.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nsfleet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Worker pods. */}}
{{- define "nsfleet.workerSelectorLabels" -}}
{{ include "nsfleet.selectorLabels" . }}
app.kubernetes.io/component: nameserver
{{- end }}

{{/* In-chart Redis pod. */}}
{{- define "nsfleet.redisSelectorLabels" -}}
{{ include "nsfleet.selectorLabels" . }}
app.kubernetes.io/component: redis
{{- end }}

{{- define "nsfleet.redisFullname" -}}
{{- printf "%s-redis" (include "nsfleet.fullname" .) }}
{{- end }}

{{/*
The address a worker advertises to the address server when every pod advertises the same one:
config.advertiseAddress, or the Service's DNS name with advertise: service. Empty: each pod its
own IP (the deployment sets NSFLEET_ADVERTISE_ADDRESS from status.podIP).
*/}}
{{- define "nsfleet.advertiseAddress" -}}
{{- if .Values.config.advertiseAddress }}
{{- .Values.config.advertiseAddress }}
{{- else if eq .Values.config.advertise "service" }}
{{- printf "%s.%s.svc:%d" (include "nsfleet.fullname" .) .Release.Namespace (int .Values.config.remotingPort) }}
{{- end }}
{{- end }}

{{- define "nsfleet.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "nsfleet.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "nsfleet.image" -}}
{{- $repo := .Values.image.repository }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repo .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "nsfleet.testImage" -}}
{{- if .Values.tests.image.repository }}
{{- printf "%s:%s" .Values.tests.image.repository (default "latest" .Values.tests.image.tag) }}
{{- else }}
{{- include "nsfleet.image" . }}
{{- end }}
{{- end }}

{{/* An IntOrString value: "25%" quoted, 1 as an integer. */}}
{{- define "nsfleet.intOrString" -}}
{{- if kindIs "string" . }}{{ . | quote }}{{ else }}{{ . | int }}{{ end }}
{{- end }}

{{/* Where the CA bundle of an external Redis is mounted. */}}
{{- define "nsfleet.redisCaDir" -}}/etc/nsfleet/redis-tls{{- end }}

{{/* Where the remoting port's certificate Secret and client CA Secret are mounted. */}}
{{- define "nsfleet.tlsDir" -}}/etc/nsfleet/tls{{- end }}
{{- define "nsfleet.tlsCaDir" -}}/etc/nsfleet/tls-ca{{- end }}

{{/*
The Redis URL handed to the workers (NSFLEET_REDIS_URL). It never carries a
password: that reaches the pod as NSFLEET_REDIS_PASSWORD from a Secret.
*/}}
{{- define "nsfleet.redisUrl" -}}
{{- $ext := .Values.externalRedis }}
{{- if .Values.redis.enabled }}
{{- printf "redis://%s.%s.svc:%d/0" (include "nsfleet.redisFullname" .) .Release.Namespace (int .Values.redis.port) }}
{{- else if $ext.url }}
{{- $ext.url }}
{{- else }}
{{- $host := $ext.host }}
{{- if contains ":" $host }}{{ $host = printf "[%s]" $host }}{{ end }}
{{- $params := list }}
{{- if $ext.tls.enabled }}
{{- if $ext.tls.caSecret }}
{{- $params = append $params (printf "ssl_ca_certs=%s/%s" (include "nsfleet.redisCaDir" .) $ext.tls.caSecretKey) }}
{{- end }}
{{- if $ext.tls.insecureSkipVerify }}
{{- $params = append $params "ssl_cert_reqs=none" }}
{{- end }}
{{- end }}
{{- printf "%s://%s:%d/%d" (ternary "rediss" "redis" $ext.tls.enabled) $host (int $ext.port) (int $ext.db) }}
{{- if $params }}?{{ join "&" $params }}{{ end }}
{{- end }}
{{- end }}

{{/* Secret (name, key) holding the Redis password, as a dict; empty name = no password. */}}
{{- define "nsfleet.redisPasswordSecret" -}}
{{- if .Values.redis.enabled }}
{{- dict "name" .Values.redis.auth.existingSecret "key" .Values.redis.auth.existingSecretPasswordKey | toJson }}
{{- else }}
{{- dict "name" .Values.externalRedis.existingSecret "key" .Values.externalRedis.existingSecretPasswordKey | toJson }}
{{- end }}
{{- end }}

{{/* Seconds the pod needs to stop cleanly: preStop + drain + the longest long-poll. */}}
{{- define "nsfleet.shutdownSeconds" -}}
{{- add (int .Values.preStop.sleepSeconds) (int .Values.config.drainTimeout) (int .Values.config.longPollMax) }}
{{- end }}

{{- define "nsfleet.terminationGracePeriodSeconds" -}}
{{- $need := int (include "nsfleet.shutdownSeconds" .) }}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds }}
{{- add $need (int .Values.terminationGraceMarginSeconds) }}
{{- else }}
{{- int .Values.terminationGracePeriodSeconds }}
{{- end }}
{{- end }}

{{/* Use the native lifecycle sleep action (GA path, Kubernetes >= 1.30)? "true"/"" */}}
{{- define "nsfleet.preStopNativeSleep" -}}
{{- if eq .Values.preStop.mode "sleep" }}true
{{- else if and (eq .Values.preStop.mode "auto") (semverCompare ">=1.30-0" .Capabilities.KubeVersion.Version) }}true
{{- end }}
{{- end }}

{{/*
Cross-field checks that values.schema.json cannot express. Included once, from
configmap.yaml, which every successful render produces.
*/}}
{{- define "nsfleet.validate" -}}
{{- $ext := .Values.externalRedis }}
{{- $extConfigured := or $ext.url $ext.host }}
{{- if and .Values.redis.enabled $extConfigured }}
{{- fail "nsfleet: both the in-chart Redis (redis.enabled=true) and an external Redis (externalRedis.url/host) are configured; choose exactly one." }}
{{- end }}
{{- if not (or .Values.redis.enabled $extConfigured) }}
{{- fail "nsfleet: no Redis configured. Set externalRedis.url (or externalRedis.host) to use your Redis (production), or redis.enabled=true for the in-chart Redis (trying it out)." }}
{{- end }}
{{- if and $ext.url $ext.host }}
{{- fail "nsfleet: set either externalRedis.url or externalRedis.host, not both." }}
{{- end }}
{{- if and $ext.url (or (regexMatch "^[A-Za-z][A-Za-z0-9+.-]*://[^/@]*:[^/@]*@" $ext.url) (regexMatch "[?&][A-Za-z_]*password=" $ext.url)) }}
{{- fail "nsfleet: externalRedis.url must not contain a password (user:password@ or a ...password= parameter): it would land in a ConfigMap. Put the password in a Secret and set externalRedis.existingSecret." }}
{{- end }}
{{- if and $ext.url (not (regexMatch "^(redis|rediss|unix|redis\\+sentinel|rediss\\+sentinel|redis\\+cluster|rediss\\+cluster)://" $ext.url)) }}
{{- fail "nsfleet: externalRedis.url must start with redis://, rediss://, unix://, redis+sentinel://, rediss+sentinel://, redis+cluster:// or rediss+cluster://." }}
{{- end }}
{{- if and $ext.url $ext.tls.enabled }}
{{- fail "nsfleet: externalRedis.tls.enabled applies to externalRedis.host; with externalRedis.url use a rediss:// URL (tls.caSecret is still mounted)." }}
{{- end }}
{{- if and (not $ext.tls.enabled) (or $ext.tls.insecureSkipVerify $ext.tls.caSecret) (not $ext.url) $ext.host }}
{{- fail "nsfleet: externalRedis.tls.caSecret/insecureSkipVerify need externalRedis.tls.enabled=true." }}
{{- end }}
{{- $tls := .Values.tls }}
{{- if and (ne $tls.mode "disabled") (not $tls.secretName) }}
{{- fail (printf "nsfleet: tls.mode %s needs tls.secretName (a Secret with the server certificate and key)." $tls.mode) }}
{{- end }}
{{- if and (ne $tls.clientAuth "none") (not $tls.caSecretName) }}
{{- fail (printf "nsfleet: tls.clientAuth %s needs tls.caSecretName (the CA bundle that signs client certificates)." $tls.clientAuth) }}
{{- end }}
{{- if and (eq $tls.mode "disabled") (or $tls.secretName $tls.caSecretName (ne $tls.clientAuth "none")) }}
{{- fail "nsfleet: tls.secretName, tls.caSecretName and tls.clientAuth need tls.mode permissive or enforcing." }}
{{- end }}
{{- $c := .Values.config }}
{{- $ports := list (int $c.httpPort) (int $c.remotingPort) }}
{{- if gt (int $c.metricsPort) 0 }}{{ $ports = append $ports (int $c.metricsPort) }}{{ end }}
{{- if ne (len $ports) (len (uniq $ports)) }}
{{- fail (printf "nsfleet: config.httpPort, config.remotingPort and config.metricsPort must differ (got %v)." $ports) }}
{{- end }}
{{- if ge (int $c.sweepInterval) (int $c.brokerTimeout) }}
{{- fail "nsfleet: config.sweepInterval must be smaller than config.brokerTimeout, or expired brokers linger." }}
{{- end }}
{{- if not (kindIs "invalid" .Values.terminationGracePeriodSeconds) }}
{{- $need := int (include "nsfleet.shutdownSeconds" .) }}
{{- if le (int .Values.terminationGracePeriodSeconds) $need }}
{{- fail (printf "nsfleet: terminationGracePeriodSeconds (%d) must be greater than preStop.sleepSeconds + config.drainTimeout + config.longPollMax (%d); leave it null to have it computed." (int .Values.terminationGracePeriodSeconds) $need) }}
{{- end }}
{{- end }}
{{- $a := .Values.autoscaling }}
{{- if $a.enabled }}
{{- if gt (int $a.minReplicas) (int $a.maxReplicas) }}
{{- fail "nsfleet: autoscaling.minReplicas must not exceed autoscaling.maxReplicas." }}
{{- end }}
{{- if and (kindIs "invalid" $a.targetCPUUtilizationPercentage) (kindIs "invalid" $a.targetMemoryUtilizationPercentage) (not $a.extraMetrics) }}
{{- fail "nsfleet: autoscaling.enabled needs at least one metric (targetCPUUtilizationPercentage, targetMemoryUtilizationPercentage or extraMetrics)." }}
{{- end }}
{{- $requests := (.Values.resources | default dict).requests | default dict }}
{{- if and (not (kindIs "invalid" $a.targetCPUUtilizationPercentage)) (not $requests.cpu) }}
{{- fail "nsfleet: CPU autoscaling needs resources.requests.cpu." }}
{{- end }}
{{- if and (not (kindIs "invalid" $a.targetMemoryUtilizationPercentage)) (not $requests.memory) }}
{{- fail "nsfleet: memory autoscaling needs resources.requests.memory." }}
{{- end }}
{{- end }}
{{- $pdb := .Values.podDisruptionBudget }}
{{- if and $pdb.enabled (kindIs "invalid" $pdb.maxUnavailable) (kindIs "invalid" $pdb.minAvailable) }}
{{- fail "nsfleet: podDisruptionBudget.enabled needs maxUnavailable or minAvailable." }}
{{- end }}
{{- end }}

{{/*
TCP ports the workers need to reach an external Redis on, as a JSON list:
networkPolicy.egress.redisPorts if given, else the port(s) in externalRedis.url
(plus 6379 for the master behind redis+sentinel:// / rediss+sentinel://; none for unix://;
redis+cluster:// lists startup nodes: nodes on other ports need networkPolicy.egress.redisPorts),
else externalRedis.port.
*/}}
{{- define "nsfleet.redisEgressPorts" -}}
{{- $ext := .Values.externalRedis }}
{{- $ports := list }}
{{- if .Values.networkPolicy.egress.redisPorts }}
{{- range .Values.networkPolicy.egress.redisPorts }}{{ $ports = append $ports (int .) }}{{ end }}
{{- else if $ext.url }}
{{- $scheme := regexReplaceAll "^([^:]+)://.*$" $ext.url "${1}" }}
{{- if ne $scheme "unix" }}
{{- $hosts := regexReplaceAll "^[^:]+://([^/?#]*).*$" $ext.url "${1}" }}
{{- $hosts = regexReplaceAll "^.*@" $hosts "" }}
{{- $hosts = regexReplaceAll "\\[[^\\]]*\\]" $hosts "" }}
{{- range regexFindAll ":[0-9]+" $hosts -1 }}{{ $ports = append $ports (trimPrefix ":" . | int) }}{{ end }}
{{- if hasSuffix "+sentinel" $scheme }}
{{- if not $ports }}{{ $ports = append $ports 26379 }}{{ end }}
{{- $ports = append $ports 6379 }}
{{- else if not $ports }}
{{- $ports = append $ports 6379 }}
{{- end }}
{{- end }}
{{- else }}
{{- $ports = append $ports (int $ext.port) }}
{{- end }}
{{- $ports | uniq | toJson }}
{{- end }}
