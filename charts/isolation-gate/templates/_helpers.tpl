{{/* Chart name. */}}
{{- define "isolation-gate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: used for every object and for the binary's --service-name and --webhook-config-name. */}}
{{- define "isolation-gate.fullname" -}}
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

{{- define "isolation-gate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "isolation-gate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "isolation-gate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "isolation-gate.labels" -}}
{{ include "isolation-gate.componentLabels" (list . "admission-webhook") }}
{{- end }}

{{/* The labels of every object, for another app.kubernetes.io/component; argument: (list $ "component"). */}}
{{- define "isolation-gate.componentLabels" -}}
{{- $ := index . 0 -}}
helm.sh/chart: {{ include "isolation-gate.chart" $ }}
{{ include "isolation-gate.selectorLabels" $ }}
app.kubernetes.io/version: {{ $.Chart.AppVersion | quote }}
app.kubernetes.io/component: {{ index . 1 }}
app.kubernetes.io/part-of: gibson
app.kubernetes.io/managed-by: {{ $.Release.Service }}
{{- end }}

{{- define "isolation-gate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "isolation-gate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "isolation-gate.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The --cert-mode the binary runs with: cert-manager delivers files. */}}
{{- define "isolation-gate.certMode" -}}
{{- if .Values.certManager.enabled }}files{{ else }}{{ .Values.tls.certMode }}{{ end }}
{{- end }}

{{/* Name of the cert-manager serving Certificate. */}}
{{- define "isolation-gate.certificateName" -}}
{{- printf "%s-serving" (include "isolation-gate.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* cert-manager chain: the self-signed Issuer, the CA Certificate (and its Secret) and the CA Issuer. */}}
{{- define "isolation-gate.selfSignedIssuerName" -}}
{{- printf "%s-selfsigned" (include "isolation-gate.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- define "isolation-gate.caName" -}}
{{- printf "%s-ca" (include "isolation-gate.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The Certificate whose CA cert-manager's CA injector writes into caBundle:
the chart's CA Certificate (stable across serving-certificate renewals), or
the serving Certificate when certManager.issuerRef names an outside issuer
(its Secret's ca.crt is that issuer's CA).
*/}}
{{- define "isolation-gate.injectCaFrom" -}}
{{- if .Values.certManager.issuerRef }}
{{- include "isolation-gate.certificateName" . }}
{{- else }}
{{- include "isolation-gate.caName" . }}
{{- end }}
{{- end }}

{{/* Self-managed mode: the ConfigMap holding the two webhook configurations. */}}
{{- define "isolation-gate.webhookTemplateConfigMap" -}}
{{- printf "%s-webhooks" (include "isolation-gate.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* --listen / --metrics-listen addresses: listen.host ("[::]", "[v6]", IPv4) and the ports. */}}
{{- define "isolation-gate.listen" -}}
{{- printf "%s:%d" .Values.listen.host (int .Values.listen.webhookPort) }}
{{- end }}
{{- define "isolation-gate.metricsListen" -}}
{{- printf "%s:%d" .Values.listen.host (int .Values.listen.metricsPort) }}
{{- end }}

{{/*
clientConfig of a webhook; argument: (list $ "/path").
caBundle: self-managed mode leaves it out (the binary writes it at run time,
and a field that is not in the manifest is not reset by helm upgrade or
kubectl apply); cert-manager mode leaves it to the CA injector; files mode
uses tls.caBundle.
*/}}
{{- define "isolation-gate.clientConfig" -}}
{{- $ := index . 0 -}}
clientConfig:
  service:
    name: {{ include "isolation-gate.fullname" $ }}
    namespace: {{ $.Release.Namespace }}
    path: {{ index . 1 }}
    port: 443
  {{- if and (not $.Values.certManager.enabled) (eq $.Values.tls.certMode "files") }}
  caBundle: {{ $.Values.tls.caBundle }}
  {{- end }}
{{- end }}

{{/*
namespaceSelector of the pod and workload webhooks: only namespaces labelled
gibson.zeroroot.ai/isolation=enforced, never the system namespaces nor the
gate's own (it would otherwise gate its own restart).
*/}}
{{- define "isolation-gate.enforcedNamespaceSelector" -}}
namespaceSelector:
  matchExpressions:
    - key: gibson.zeroroot.ai/isolation
      operator: In
      values:
        - enforced
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
        - kube-system
        - kube-public
        - kube-node-lease
        - {{ .Release.Namespace }}
        {{- range .Values.webhook.excludedNamespaces }}
        - {{ . }}
        {{- end }}
{{- end }}

{{/*
The second scope (docs/operations.md, "Where the gate applies"): a pod that
names a Component (objectSelector on the label; on UPDATE the old or the new
pod) in any namespace that is neither enforced nor in audit mode, except the
never-enforced ones.
Component code does not decide where it runs: a pod that claims a Component is
decided wherever it is. Unlabelled pods there never reach the gate.
*/}}
{{- define "isolation-gate.componentPodsSelectors" -}}
namespaceSelector:
  matchExpressions:
    - key: gibson.zeroroot.ai/isolation
      operator: NotIn
      values:
        - enforced
        - audit
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
        - kube-system
        - kube-public
        - kube-node-lease
        - {{ .Release.Namespace }}
        {{- range .Values.webhook.excludedNamespaces }}
        - {{ . }}
        {{- end }}
objectSelector:
  matchExpressions:
    - key: gibson.zeroroot.ai/component
      operator: Exists
{{- end }}

{{/* Settings every webhook shares. */}}
{{- define "isolation-gate.webhookCommon" -}}
{{- include "isolation-gate.webhookSettings" (list . "Fail") }}
{{- end }}

{{/*
The audit webhooks' settings: the same, but failurePolicy Ignore. An audit
namespace is one the gate does not enforce yet, so an outage of the gate must
not block its pods (their answers are warnings anyway).
*/}}
{{- define "isolation-gate.auditWebhookCommon" -}}
{{- include "isolation-gate.webhookSettings" (list . "Ignore") }}
{{- end }}

{{- define "isolation-gate.webhookSettings" -}}
{{- $ := index . 0 -}}
admissionReviewVersions:
  - v1
sideEffects: None
failurePolicy: {{ index . 1 }}
matchPolicy: Equivalent
timeoutSeconds: {{ $.Values.webhook.timeoutSeconds }}
{{- end }}

{{/* Namespaces in audit mode (gibson.zeroroot.ai/isolation=audit), but never the never-enforced ones. */}}
{{- define "isolation-gate.auditNamespaceSelector" -}}
namespaceSelector:
  matchExpressions:
    - key: gibson.zeroroot.ai/isolation
      operator: In
      values:
        - audit
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
        - kube-system
        - kube-public
        - kube-node-lease
        - {{ .Release.Namespace }}
        {{- range .Values.webhook.excludedNamespaces }}
        - {{ . }}
        {{- end }}
{{- end }}

{{/* The helm test's scratch namespace: selftest.namespace, else <release namespace>-selftest. */}}
{{- define "isolation-gate.selftestNamespace" -}}
{{- default (printf "%s-selftest" .Release.Namespace | trunc 63 | trimSuffix "-") .Values.selftest.namespace }}
{{- end }}

{{/* The helm test Pod's ServiceAccount (and its Role in the scratch namespace). */}}
{{- define "isolation-gate.selftestServiceAccountName" -}}
{{- printf "%s-selftest" (include "isolation-gate.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of the pods that are not webhook replicas (the cleanup Job's, the helm
test's); argument: (list $ "component"). Their app.kubernetes.io/name is
"<name>-<component>" so that the Deployment's selector, the Service, the PDB and
the anti-affinity never count them as webhook pods.
*/}}
{{- define "isolation-gate.auxPodLabels" -}}
{{- $ := index . 0 -}}
helm.sh/chart: {{ include "isolation-gate.chart" $ }}
app.kubernetes.io/name: {{ printf "%s-%s" (include "isolation-gate.name" $) (index . 1) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/version: {{ $.Chart.AppVersion | quote }}
app.kubernetes.io/component: {{ index . 1 }}
app.kubernetes.io/part-of: gibson
app.kubernetes.io/managed-by: {{ $.Release.Service }}
{{- end }}
