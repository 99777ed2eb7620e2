{{/* The manager's image reference. */}}
{{- define "vacuum-operator.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{/* The manager's service account, as a subject. */}}
{{- define "vacuum-operator.subject" -}}
- kind: ServiceAccount
  name: vacuum-operator-controller-manager
  namespace: {{ .Release.Namespace }}
{{- end }}
