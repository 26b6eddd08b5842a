{{/* Access control (docs/security.md): checks, and the Secrets mounted for it. */}}

{{- define "nsfleet.validateSecurity" -}}
{{- $s := .Values.security }}
{{- if and (ne $s.aclMode "off") (not $s.accountsSecret) }}
{{- fail "nsfleet: security.aclMode permissive/enforcing needs security.accountsSecret (the accounts file)." }}
{{- end }}
{{- if and $s.httpProxyProtocol (not $s.trustedProxies) }}
{{- fail "nsfleet: security.httpProxyProtocol needs security.trustedProxies (whose PROXY headers to believe)." }}
{{- end }}
{{- end -}}

{{/* The Secret-backed files as a JSON list of {name, secret, key, dir, env}. */}}
{{- define "nsfleet.securityFiles" -}}
{{- $s := .Values.security }}
{{- $out := list }}
{{- if $s.accountsSecret }}
{{- $out = append $out (dict "name" "acl" "secret" $s.accountsSecret "key" $s.accountsSecretKey "dir" "/etc/nsfleet/acl" "env" "NSFLEET_ACL_FILE") }}
{{- end }}
{{- if $s.readTokenSecret }}
{{- $out = append $out (dict "name" "read-token" "secret" $s.readTokenSecret "key" $s.readTokenSecretKey "dir" "/etc/nsfleet/read-token" "env" "NSFLEET_READ_TOKEN_FILE") }}
{{- end }}
{{- if $s.writeTokenSecret }}
{{- $out = append $out (dict "name" "write-token" "secret" $s.writeTokenSecret "key" $s.writeTokenSecretKey "dir" "/etc/nsfleet/write-token" "env" "NSFLEET_WRITE_TOKEN_FILE") }}
{{- end }}
{{- dict "files" $out | toJson }}
{{- end -}}
