{{/* The image, with the chart's appVersion as the default tag. */}}
{{- define "switchyard.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The labels every object carries (deploy/'s). */}}
{{- define "switchyard.labels" -}}
app.kubernetes.io/name: switchyard
{{- end }}

{{/* The KubeProxyConfiguration the daemon reads (--config). */}}
{{- define "switchyard.config" -}}
{{- $c := dict "apiVersion" "kubeproxy.config.k8s.io/v1alpha1" "kind" "KubeProxyConfiguration" -}}
{{- $_ := set $c "mode" .Values.mode -}}
{{- $_ := set $c "clusterCIDR" .Values.clusterCIDR -}}
{{- $_ := set $c "metricsBindAddress" .Values.metricsBindAddress -}}
{{- $_ := set $c "healthzBindAddress" .Values.healthzBindAddress -}}
{{- with .Values.detectLocalMode }}{{ $_ := set $c "detectLocalMode" . }}{{ end -}}
{{- with .Values.detectLocal }}{{ $_ := set $c "detectLocal" . }}{{ end -}}
{{- with .Values.nodePortAddresses }}{{ $_ := set $c "nodePortAddresses" . }}{{ end -}}
{{- with .Values.iptables }}{{ $_ := set $c "iptables" . }}{{ end -}}
{{- with .Values.ipvs }}{{ $_ := set $c "ipvs" . }}{{ end -}}
{{- with .Values.nftables }}{{ $_ := set $c "nftables" . }}{{ end -}}
{{- with .Values.conntrack }}{{ $_ := set $c "conntrack" . }}{{ end -}}
{{- $c = mergeOverwrite $c (deepCopy .Values.extraConfig) -}}
{{ toYaml $c }}
{{- end }}
