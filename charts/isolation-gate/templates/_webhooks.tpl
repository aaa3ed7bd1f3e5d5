{{/*
The two webhook configurations, whole. Self-managed mode puts them, as text,
into the ConfigMap <fullname>-webhooks (webhooks.yaml) and the leader creates
them from it once a replica is ready (--webhook-template-configmap), so a
fresh install never has a fail-closed webhook with no one behind it. files
and cert-manager modes render them as objects directly.

Every webhook fails closed: failurePolicy Fail, so a webhook that is down,
slow or without a CA yet rejects instead of letting a pod through.
*/}}
{{- define "isolation-gate.webhookAnnotations" -}}
{{- if .Values.certManager.enabled }}
annotations:
  # cert-manager's CA injector writes the CA into caBundle: the CA
  # Certificate's, so that renewing the serving certificate never changes it.
  cert-manager.io/inject-ca-from: {{ printf "%s/%s" .Release.Namespace (include "isolation-gate.injectCaFrom" .) }}
{{- end }}
{{- end }}

{{- define "isolation-gate.mutatingWebhookConfiguration" -}}
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: {{ include "isolation-gate.fullname" . }}
  labels:
    {{- include "isolation-gate.labels" . | nindent 4 }}
  {{- with include "isolation-gate.webhookAnnotations" . | trim }}
  {{- . | nindent 2 }}
  {{- end }}
webhooks:
  # Decides for each new pod in an enforced namespace: RequireSetec patches
  # spec.runtimeClassName and the decision annotation, AllowInProcess only the
  # annotation, Deny rejects.
  - name: pods.mutate.gibson.zeroroot.ai
    {{- include "isolation-gate.clientConfig" (list . "/mutate/pods") | nindent 4 }}
    rules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["CREATE"]
        resources: ["pods"]
        scope: Namespaced
    {{- include "isolation-gate.enforcedNamespaceSelector" . | nindent 4 }}
    {{- include "isolation-gate.webhookCommon" . | nindent 4 }}
    reinvocationPolicy: {{ .Values.webhook.reinvocationPolicy }}
  # The same for pods that name a Component in every other namespace (not the
  # never-enforced ones): component code is decided wherever it runs.
  - name: component-pods.mutate.gibson.zeroroot.ai
    {{- include "isolation-gate.clientConfig" (list . "/mutate/pods") | nindent 4 }}
    rules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["CREATE"]
        resources: ["pods"]
        scope: Namespaced
    {{- include "isolation-gate.componentPodsSelectors" . | nindent 4 }}
    {{- include "isolation-gate.webhookCommon" . | nindent 4 }}
    reinvocationPolicy: {{ .Values.webhook.reinvocationPolicy }}
{{- end }}

{{- define "isolation-gate.validatingWebhookConfiguration" -}}
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: {{ include "isolation-gate.fullname" . }}
  labels:
    {{- include "isolation-gate.labels" . | nindent 4 }}
  {{- with include "isolation-gate.webhookAnnotations" . | trim }}
  {{- . | nindent 2 }}
  {{- end }}
webhooks:
  # Re-decides on the final pod, after every mutating webhook; on UPDATE and
  # on pods/ephemeralcontainers (kubectl debug) judges an image swap, a
  # changed component label or an added container by the same rules.
  - name: pods.validate.gibson.zeroroot.ai
    {{- include "isolation-gate.clientConfig" (list . "/validate/pods") | nindent 4 }}
    rules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["pods", "pods/ephemeralcontainers"]
        scope: Namespaced
    {{- include "isolation-gate.enforcedNamespaceSelector" . | nindent 4 }}
    {{- include "isolation-gate.webhookCommon" . | nindent 4 }}
  # The same for pods that name a Component outside enforced namespaces (a
  # workload's own labels need not carry the template's, so templates there
  # are judged when their pods are).
  - name: component-pods.validate.gibson.zeroroot.ai
    {{- include "isolation-gate.clientConfig" (list . "/validate/pods") | nindent 4 }}
    rules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["pods", "pods/ephemeralcontainers"]
        scope: Namespaced
    {{- include "isolation-gate.componentPodsSelectors" . | nindent 4 }}
    {{- include "isolation-gate.webhookCommon" . | nindent 4 }}
  # Decides on pod templates so that `kubectl apply` of a workload shows a
  # denial at once instead of a FailedCreate on its ReplicaSet. Never mutates.
  - name: workloads.validate.gibson.zeroroot.ai
    {{- include "isolation-gate.clientConfig" (list . "/validate/workloads") | nindent 4 }}
    rules:
      - apiGroups: ["apps"]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["deployments", "statefulsets", "daemonsets", "replicasets"]
        scope: Namespaced
      - apiGroups: ["batch"]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["jobs", "cronjobs"]
        scope: Namespaced
    {{- include "isolation-gate.enforcedNamespaceSelector" . | nindent 4 }}
    {{- include "isolation-gate.webhookCommon" . | nindent 4 }}
  # Audit mode (gibson.zeroroot.ai/isolation=audit): every answer enforcement
  # would give on pods (CREATE as the mutating webhook, UPDATE and
  # pods/ephemeralcontainers as the validating one) and on workload templates,
  # as warnings, audit annotations and would_deny / would_patch metrics.
  # Nothing is denied or patched; failurePolicy Ignore.
  - name: pods.audit.gibson.zeroroot.ai
    {{- include "isolation-gate.clientConfig" (list . "/audit/pods") | nindent 4 }}
    rules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["pods", "pods/ephemeralcontainers"]
        scope: Namespaced
    {{- include "isolation-gate.auditNamespaceSelector" . | nindent 4 }}
    {{- include "isolation-gate.auditWebhookCommon" . | nindent 4 }}
  - name: workloads.audit.gibson.zeroroot.ai
    {{- include "isolation-gate.clientConfig" (list . "/audit/workloads") | nindent 4 }}
    rules:
      - apiGroups: ["apps"]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["deployments", "statefulsets", "daemonsets", "replicasets"]
        scope: Namespaced
      - apiGroups: ["batch"]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["jobs", "cronjobs"]
        scope: Namespaced
    {{- include "isolation-gate.auditNamespaceSelector" . | nindent 4 }}
    {{- include "isolation-gate.auditWebhookCommon" . | nindent 4 }}
  # Validates spec.policy.content_trust of Components in every namespace,
  # enforced or not, and warns when it is omitted.
  - name: components.validate.gibson.zeroroot.ai
    {{- include "isolation-gate.clientConfig" (list . "/validate/components") | nindent 4 }}
    rules:
      - apiGroups: ["gibson.zeroroot.ai"]
        apiVersions: ["v1alpha1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["components"]
        scope: Namespaced
    {{- include "isolation-gate.webhookCommon" . | nindent 4 }}
  # Refuses to switch enforcement off (remove or change the label) unless the
  # requester is in webhook.enforcementAdmins. Only namespaces that carry the
  # label are sent (objectSelector: old or new object), so the rest of the
  # cluster never depends on the gate.
  - name: namespaces.validate.gibson.zeroroot.ai
    {{- include "isolation-gate.clientConfig" (list . "/validate/namespaces") | nindent 4 }}
    rules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["UPDATE"]
        resources: ["namespaces", "namespaces/status", "namespaces/finalize"]
        scope: Cluster
    objectSelector:
      matchExpressions:
        - key: gibson.zeroroot.ai/isolation
          operator: Exists
    {{- include "isolation-gate.webhookCommon" . | nindent 4 }}
{{- end }}
