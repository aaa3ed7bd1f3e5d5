{{/*
Checks across values that values.schema.json cannot express. Included from
deployment.yaml, which is always rendered, so `helm template`, `helm install`
and `helm upgrade` stop here with a message naming the value and the rule,
instead of installing a Deployment whose pods crash-loop on the same rule.

The rules are the ones `isolation-gate serve --check-config` applies to the
flags this chart passes (src/cli/serve_options.cpp, parse_serve_options), plus a few
the binary can only find out at run time (ports, the placeholder image).
tests/packaging/test_chart_guards.py renders each refused combination and runs
the binary's --check-config on the same values: the chart refuses exactly
what the binary refuses.
*/}}

{{/*
A duration as the binary reads it (src/config/duration.cpp): "0", or a
sequence of <number><unit> with units ns, us, µs, ms, s, m, h ("1h30m",
"500ms", "1.5s"). Argument: the string. Output: whole milliseconds (floored,
as the binary does), as text; use `float64` on it. The schema's pattern has
already checked the form.
*/}}
{{- define "isolation-gate.durationMs" -}}
{{- $text := toString . -}}
{{- $units := dict "ns" 0.000001 "us" 0.001 "µs" 0.001 "ms" 1.0 "s" 1000.0 "m" 60000.0 "h" 3600000.0 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "[0-9.]+(ns|us|µs|ms|s|m|h)" $text -1 -}}
{{- $number := regexFind "^[0-9.]+" . -}}
{{- $unit := trimPrefix $number . -}}
{{- $total = addf $total (mulf (float64 $number) (get $units $unit)) -}}
{{- end -}}
{{- floor $total -}}
{{- end }}

{{/*
A duration value, checked against the binary's upper bound (9e15 ms, "too
long"). Argument: (list "the.value.path" value). Output: milliseconds.
*/}}
{{- define "isolation-gate.checkedDurationMs" -}}
{{- $ms := include "isolation-gate.durationMs" (index . 1) | float64 -}}
{{- if gt $ms 9000000000000000.0 -}}
{{- fail (printf "%s (%s) is too long: the binary refuses durations over 9e15ms (about 285,000 years)" (index . 0) (index . 1)) -}}
{{- end -}}
{{- $ms -}}
{{- end }}

{{/*
The value of a flag given in extraArgs, as "--flag=value" or as "--flag"
followed by "value"; the last one wins. Argument: (list $.Values.extraArgs
"--flag"). Output: the value, or nothing.
*/}}
{{- define "isolation-gate.extraArg" -}}
{{- $args := index . 0 -}}
{{- $flag := index . 1 -}}
{{- $found := "" -}}
{{- range $i, $a := $args -}}
{{- $a = toString $a -}}
{{- if hasPrefix (printf "%s=" $flag) $a -}}
{{- $found = trimPrefix (printf "%s=" $flag) $a -}}
{{- else if and (eq $a $flag) (lt (add1 $i) (len $args)) -}}
{{- $found = toString (index $args (add1 $i)) -}}
{{- end -}}
{{- end -}}
{{- $found -}}
{{- end }}

{{- define "isolation-gate.validate" -}}
{{- $v := .Values -}}

{{- /* The image: the chart's default repository is a placeholder. */ -}}
{{- if and (eq $v.image.repository "registry.example.com/gibson/isolation-gate") (not $v.image.allowPlaceholder) }}
{{- fail "image.repository is still the placeholder registry.example.com/gibson/isolation-gate: build the image (scripts/build-image.sh), push it to your registry and set image.repository (and image.digest, or image.tag). Set image.allowPlaceholder=true only to run an image built locally under that name (a kind cluster, the repository's tests)" }}
{{- end }}

{{- /* The drain delay and the grace period. */ -}}
{{- $grace := int $v.terminationGracePeriodSeconds }}
{{- $drain := int $v.drainDelaySeconds }}
{{- if lt $grace (add $drain 15) }}
{{- fail (printf "terminationGracePeriodSeconds (%d) must be at least drainDelaySeconds (%d) + 15: after SIGTERM the pod keeps serving for the drain delay, then drains in-flight requests for up to 10s before it exits" $grace $drain) }}
{{- end }}

{{- /* Leader election (serve: --lease-duration > --renew-deadline > 1.2 x --retry-period > 0). */ -}}
{{- $le := $v.leaderElection }}
{{- $lease := include "isolation-gate.checkedDurationMs" (list "leaderElection.leaseDuration" $le.leaseDuration) | float64 }}
{{- $renew := include "isolation-gate.checkedDurationMs" (list "leaderElection.renewDeadline" $le.renewDeadline) | float64 }}
{{- $retry := include "isolation-gate.checkedDurationMs" (list "leaderElection.retryPeriod" $le.retryPeriod) | float64 }}
{{- if not (gt $retry 0.0) }}
{{- fail (printf "leaderElection.retryPeriod (%s) must be more than 0 (whole milliseconds): replicas retry the Lease that often" $le.retryPeriod) }}
{{- end }}
{{- if not (gt $lease $renew) }}
{{- fail (printf "leaderElection.leaseDuration (%s) must be longer than leaderElection.renewDeadline (%s): a leader must give up its loops before another replica can take the Lease over (the binary requires leaseDuration > renewDeadline > 1.2 x retryPeriod)" $le.leaseDuration $le.renewDeadline) }}
{{- end }}
{{- if not (gt $renew (mulf 1.2 $retry)) }}
{{- fail (printf "leaderElection.renewDeadline (%s) must be more than 1.2 x leaderElection.retryPeriod (%s): a leader must get more than one renewal attempt before its deadline (the binary requires leaseDuration > renewDeadline > 1.2 x retryPeriod)" $le.renewDeadline $le.retryPeriod) }}
{{- end }}

{{- /* Self-managed certificates (serve: --cert-validity >= 3s, --ca-validity >= --cert-validity). */ -}}
{{- if eq (include "isolation-gate.certMode" .) "self-managed" }}
{{- $cert := include "isolation-gate.checkedDurationMs" (list "tls.certValidity" $v.tls.certValidity) | float64 }}
{{- $ca := include "isolation-gate.checkedDurationMs" (list "tls.caValidity" $v.tls.caValidity) | float64 }}
{{- if lt $cert 3000.0 }}
{{- fail (printf "tls.certValidity (%s) must be at least 3s: the serving certificate is renewed at two thirds of its lifetime" $v.tls.certValidity) }}
{{- end }}
{{- if lt $ca $cert }}
{{- fail (printf "tls.certValidity (%s) must not exceed tls.caValidity (%s): a serving certificate cannot outlive the CA that signs it" $v.tls.certValidity $v.tls.caValidity) }}
{{- end }}
{{- end }}

{{- /* Client certificates: one source for the CA. */ -}}
{{- $clientCA := $v.tls.clientCA | default dict }}
{{- if $clientCA.enabled }}
{{- if eq (empty $clientCA.secretName) (empty $clientCA.configMapName) }}
{{- fail "tls.clientCA.enabled needs exactly one of tls.clientCA.secretName and tls.clientCA.configMapName" }}
{{- end }}
{{- end }}

{{- /* Ports: the binary binds both listeners; with hostNetwork they are the node's. */ -}}
{{- if eq (int $v.listen.webhookPort) (int $v.listen.metricsPort) }}
{{- fail (printf "listen.webhookPort and listen.metricsPort are both %d: the HTTPS webhook and the plain-HTTP metrics/probe listener need a port each" (int $v.listen.webhookPort)) }}
{{- end }}
{{- if $v.hostNetwork }}
{{- range $name, $port := dict "listen.webhookPort" $v.listen.webhookPort "listen.metricsPort" $v.listen.metricsPort }}
{{- if has (int $port) (list 10250 10256) }}
{{- fail (printf "%s is %d with hostNetwork: the pod shares the node's ports, and %d is the %s's; choose another port (docs/operations.md, \"Managed clusters\")" $name (int $port) (int $port) (ternary "kubelet" "kube-proxy health check" (eq (int $port) 10250))) }}
{{- end }}
{{- end }}
{{- end }}

{{- /*
allowedExtraImages, as the binary parses --allowed-extra-images
(src/model/image.cpp, parse_image_pattern): REPO:TAG, REPO@DIGEST, REPO:* or
PREFIX/*, names in the distribution reference grammar, and no registry-wide
prefix. (Not checked here: a name over 255 characters once normalised.)
*/ -}}
{{- $domain := `(\[[0-9A-Fa-f:]+\]|[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*)(:[0-9]+)?` }}
{{- $component := `[a-z0-9]+((\.|__?|-+)[a-z0-9]+)*` }}
{{- $undotted := `[a-z0-9]+((__?|-+)[a-z0-9]+)*` }}
{{- /* A first segment with a dot, a colon or a capital is a registry (docker's rule). */ -}}
{{- $name := printf `(%s/%s(/%s)*|%s(/%s)*|%s)` $domain $component $component $undotted $component $component }}
{{- $prefix := printf `(%s/%s(/%s)*|%s(/%s)+)` $domain $component $component $undotted $component }}
{{- $tag := `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}` }}
{{- $digest := `(sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128})` }}
{{- range $i, $p := $v.allowedExtraImages | default list }}
{{- $what := printf "allowedExtraImages[%d] (%s)" $i $p }}
{{- if hasSuffix "/*" $p }}
{{- $pre := trimSuffix "/*" $p }}
{{- if or (not (contains "/" $pre)) (regexMatch `^(docker\.io|index\.docker\.io)/library$` $pre) }}
{{- fail (printf "%s: registry-wide patterns are refused: it allows every image of a registry, of a single path segment or of docker.io's official library, any of which has images with a shell; name the registry and an organisation (ghcr.io/org/*), or REPO:TAG" $what) }}
{{- else if not (regexMatch (printf "^%s$" $prefix) $pre) }}
{{- fail (printf "%s: %s is not a registry and a repository path (lowercase components separated by /; use REPO:TAG, REPO@DIGEST, REPO:* or PREFIX/*)" $what $pre) }}
{{- end }}
{{- else if hasSuffix ":*" $p }}
{{- if not (regexMatch (printf "^%s$" $name) (trimSuffix ":*" $p)) }}
{{- fail (printf "%s: REPO:* names a valid repository without a tag or digest (use REPO:TAG, REPO@DIGEST, REPO:* or PREFIX/*)" $what) }}
{{- end }}
{{- else if contains "*" $p }}
{{- fail (printf "%s: \"*\" may appear only at the end, as :* or /*" $what) }}
{{- else if not (regexMatch (printf "^%s(:%s)?(@%s)?$" $name $tag $digest) $p) }}
{{- fail (printf "%s is not a valid image reference: REPO:TAG or REPO@DIGEST (sha256:, sha384: or sha512: and lowercase hex), the repository lowercase components separated by /" $what) }}
{{- else if not (regexMatch (printf "(:%s|@%s)$" $tag $digest) $p) }}
{{- fail (printf "%s: a bare repository is ambiguous; name its tag, or :* for any tag" $what) }}
{{- end }}
{{- end }}

{{- /* Flags given in extraArgs, with the rules serve applies to them. */ -}}
{{- $extra := $v.extraArgs | default list }}
{{- range $flag := list "--namespace" "--service-name" "--webhook-config-name" "--tls-secret" "--cert-mode" "--cert-validity" "--ca-validity" "--webhook-template-configmap" "--tls-cert" "--tls-key" "--client-ca" "--lease-name" "--lease-duration" "--renew-deadline" "--retry-period" "--runtime-class" "--allowed-extra-images" "--allowed-kata-annotations" "--listen" "--metrics-listen" "--drain-delay" "--log-level" "--enforcement-admins" "--trust-admins" "--evict-drifted" "--evict-rate" "--drift-eviction-settle" "--local" "--components" "--sandbox" "--check-config" }}
{{- range $a := $extra }}
{{- if or (eq (toString $a) $flag) (hasPrefix (printf "%s=" $flag) (toString $a)) }}
{{- fail (printf "extraArgs has %s: the chart sets that flag from its values (or it does not belong in a cluster install); set the value instead (values.yaml)" $flag) }}
{{- end }}
{{- end }}
{{- end }}
{{- range $flag := list "--kube-watch-silence" "--sandbox-stale-after" "--tls-handshake-timeout" }}
{{- $text := include "isolation-gate.extraArg" (list $extra $flag) }}
{{- if and $text (not (regexMatch `^(0|(([0-9]+\.?[0-9]*|\.[0-9]+)(ns|us|µs|ms|s|m|h))+)$` $text)) }}
{{- fail (printf "extraArgs: %s (%s) is not a duration (e.g. 15s, 2m, 1h30m; units ns, us, ms, s, m, h)" $flag $text) }}
{{- end }}
{{- end }}
{{- range $flag := list "--max-connections" "--max-connections-per-source" }}
{{- $text := include "isolation-gate.extraArg" (list $extra $flag) }}
{{- if and $text (or (not (regexMatch "^[0-9]{1,7}$" $text)) (lt (atoi $text) 1) (gt (atoi $text) 1000000)) }}
{{- fail (printf "extraArgs: %s (%s) must be a whole number from 1 to 1000000" $flag $text) }}
{{- end }}
{{- end }}
{{- $silenceText := include "isolation-gate.extraArg" (list $extra "--kube-watch-silence") | default "150s" }}
{{- $staleText := include "isolation-gate.extraArg" (list $extra "--sandbox-stale-after") | default "300s" }}
{{- $silence := include "isolation-gate.checkedDurationMs" (list "extraArgs --kube-watch-silence" $silenceText) | float64 }}
{{- $stale := include "isolation-gate.checkedDurationMs" (list "extraArgs --sandbox-stale-after" $staleText) | float64 }}
{{- if and (gt $stale 0.0) (gt $silence 0.0) (le $stale $silence) }}
{{- fail (printf "extraArgs: --sandbox-stale-after (%s) must be longer than --kube-watch-silence (%s), or 0s: a quiet watch is reopened before the sandbox counts as unknown" $staleText $silenceText) }}
{{- end }}
{{- $handshakeText := include "isolation-gate.extraArg" (list $extra "--tls-handshake-timeout") | default "3s" }}
{{- $handshake := include "isolation-gate.checkedDurationMs" (list "extraArgs --tls-handshake-timeout" $handshakeText) | float64 }}
{{- if or (lt $handshake 100.0) (gt $handshake 60000.0) }}
{{- fail (printf "extraArgs: --tls-handshake-timeout (%s) must be between 100ms and 60s" $handshakeText) }}
{{- end }}
{{- $maxConnText := include "isolation-gate.extraArg" (list $extra "--max-connections") | default "4096" }}
{{- $perSourceText := include "isolation-gate.extraArg" (list $extra "--max-connections-per-source") | default "2048" }}
{{- if and (regexMatch "^[0-9]+$" $maxConnText) (regexMatch "^[0-9]+$" $perSourceText) }}
{{- if gt (atoi $perSourceText) (atoi $maxConnText) }}
{{- fail (printf "extraArgs: --max-connections-per-source (%s) must be at most --max-connections (%s)" $perSourceText $maxConnText) }}
{{- end }}
{{- end }}

{{- /* helm test: selftest --timeout must be at least 1s; its namespace must be enforced. */ -}}
{{- if $v.selftest.enabled }}
{{- $scratch := include "isolation-gate.selftestNamespace" . }}
{{- if or (has $scratch (list "kube-system" "kube-public" "kube-node-lease" "default" .Release.Namespace)) (has $scratch ($v.webhook.excludedNamespaces | default list)) }}
{{- fail (printf "selftest.namespace (%s) must be a namespace of its own that the gate enforces: not the release namespace, a system namespace, default, nor one of webhook.excludedNamespaces" $scratch) }}
{{- end }}
{{- $st := include "isolation-gate.checkedDurationMs" (list "selftest.timeout" $v.selftest.timeout) | float64 }}
{{- if lt $st 1000.0 }}
{{- fail (printf "selftest.timeout (%s) must be at least 1s" $v.selftest.timeout) }}
{{- end }}
{{- end }}
{{- end }}
