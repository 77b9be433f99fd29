#!/usr/bin/env bash
# helm-chart.sh [chart-dir] -- (re)generates the Helm chart (default dist/chart) from the kustomize
# config with kubebuilder's helm/v2-alpha plugin, in a scratch copy of the project (the plugin also
# edits PROJECT and the Makefile; those edits are thrown away).
#
# The plugin is fed config/cert-manager, rendered, so that it templates both certificate modes
# (certManager.enabled gates the Issuer, the Certificate, the CA-injection annotations and
# --webhook-cert-path), with these fixes applied around it:
# - the plugin writes one template per object name, so objects of different kinds with the same
#   name overwrite each other. config/policy names each admission policy's binding as the policy,
#   and config/rbac the binding of the aggregated ClusterRole manager-scale-targets as the role:
#   the bindings are fed to the plugin as <name>-binding, or the chart would have no policies,
#   then their templates are given back the kustomize install's names, so that a release named
#   fencedlock has the same object names as config/default (cmd/manager/chart_names_test.go checks).
# - config/rbac has a namespaced Role and a ClusterRole both named manager-role (controller-gen
#   names both after rbac:roleName), and likewise their bindings: the plugin keeps one file per
#   name (and the chart's rbac.namespaced=true turns the ClusterRole into a Role). The Role for the
#   certificate Secret and its binding are renamed manager-secrets-role(binding) here: the two
#   names in which a release named fencedlock differs from config/default.
# - self-managed certificates (certManager.enabled=false, the default) need the empty Secret
#   config/default ships and its mount, which the cert-manager rendering lacks.
# Chart.yaml, values.yaml, templates/NOTES.txt and templates/_helpers.tpl are kept from the chart
# dir when it has them (the plugin preserves them too): values.yaml is maintained by hand.
# Env: KUBEBUILDER (bin/kubebuilder), KUSTOMIZE (bin/kustomize).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:-$ROOT/dist/chart}
KUBEBUILDER=${KUBEBUILDER:-$ROOT/bin/kubebuilder}
KUSTOMIZE=${KUSTOMIZE:-$ROOT/bin/kustomize}
[ -x "$KUBEBUILDER" ] || { echo "no kubebuilder at $KUBEBUILDER: run make kubebuilder" >&2; exit 1; }
[ -x "$KUSTOMIZE" ] || { echo "no kustomize at $KUSTOMIZE: run make kustomize" >&2; exit 1; }

W=$(mktemp -d)
mkdir -p "$ROOT/bin"
O=$(mktemp -d "$ROOT/bin/.chart-overlay.XXXXXX") # kustomize takes resources only by relative path
trap 'rm -rf "$W" "$O"' EXIT
cat > "$O/kustomization.yaml" <<YAML
resources:
- $(realpath --relative-to="$O" "$ROOT/config/cert-manager")
patches:
- target: {kind: Role, name: fencedlock-manager-role}
  patch: |-
    - op: replace
      path: /metadata/name
      value: fencedlock-manager-secrets-role
- target: {kind: RoleBinding, name: fencedlock-manager-rolebinding}
  patch: |-
    - op: replace
      path: /metadata/name
      value: fencedlock-manager-secrets-rolebinding
    - op: replace
      path: /roleRef/name
      value: fencedlock-manager-secrets-role
YAML
BINDINGS=(ValidatingAdmissionPolicyBinding:lease-protocol ValidatingAdmissionPolicyBinding:queue-lease
  ValidatingAdmissionPolicyBinding:waiter-lease ValidatingAdmissionPolicyBinding:lease-deletion
  ValidatingAdmissionPolicyBinding:lock-deletion
  ValidatingAdmissionPolicyBinding:fenced-subresources ValidatingAdmissionPolicyBinding:pod-binding
  ValidatingAdmissionPolicyBinding:pod-grant
  MutatingAdmissionPolicyBinding:token-record ClusterRoleBinding:manager-scale-targets)
for b in "${BINDINGS[@]}"; do
  cat >> "$O/kustomization.yaml" <<YAML
- target: {kind: ${b%%:*}, name: fencedlock-${b#*:}}
  patch: |-
    - op: replace
      path: /metadata/name
      value: fencedlock-${b#*:}-binding
YAML
done
"$KUSTOMIZE" build "$O" > "$W/install.yaml"

cp "$ROOT/PROJECT" "$ROOT/Makefile" "$W/"
mkdir -p "$W/dist/chart/templates"
for f in Chart.yaml values.yaml templates/NOTES.txt templates/_helpers.tpl; do
  [ ! -f "$OUT/$f" ] || cp "$OUT/$f" "$W/dist/chart/$f"
done
(cd "$W" && "$KUBEBUILDER" edit --plugins=helm/v2-alpha --manifests=install.yaml --output-dir=dist > "$W/kubebuilder.log" 2>&1) ||
  { cat "$W/kubebuilder.log" >&2; exit 1; }
C=$W/dist/chart
# One template file per object (but the Namespace, which `helm install --create-namespace` makes).
want=$(grep -c '^kind:' "$W/install.yaml")
# (The plugin adds templates/network-policy and templates/prometheus of its own.)
got=$(grep -l '^kind:\|^  kind: ' -r "$C/templates" --include='*.yaml' --exclude-dir=network-policy --exclude-dir=prometheus | wc -l)
[ "$got" = $((want - 1)) ] ||
  { echo "the chart has $got templates for $((want - 1)) objects: objects of the same name overwrote each other" >&2; exit 1; }
# The plugin keeps templates of files it no longer generates: none here, the scratch dir is new.
grep -q 'kind: Role$' "$C/templates/rbac/manager-secrets-role.yaml" ||
  { echo "the certificate Secret's Role is missing from the generated chart" >&2; exit 1; }
for p in lease-protocol queue-lease waiter-lease lease-deletion lock-deletion fenced-subresources pod-binding pod-grant token-record; do
  [ "$(cat "$C"/templates/*/"$p".yaml "$C"/templates/*/"$p"-binding.yaml 2> /dev/null | grep -c '^kind: .*AdmissionPolicy')" = 2 ] ||
    { echo "admission policy $p or its binding is missing from the generated chart" >&2; exit 1; }
done
# The bindings get their kustomize names back (their files keep the -binding suffix).
for b in "${BINDINGS[@]}"; do
  n=${b#*:}
  f=$(ls "$C"/templates/*/"$n"-binding.yaml)
  perl -pi -e 's/^(  name: \{\{ include "fencedlock\.resourceName" \(dict "suffix" )"\Q'"$n"'\E-binding"/$1"'"$n"'"/' "$f"
  grep -q "^  name: {{ include \"fencedlock.resourceName\" (dict \"suffix\" \"$n\" " "$f" ||
    { echo "$f: could not give the binding back its name $n" >&2; exit 1; }
done

# Self-managed certificates: mount the Secret in both modes (cert-manager writes the same Secret).
perl -0pi -e 's/\{\{- if and \.Values\.certManager\.enabled \.Values\.webhook\.enabled \}\}(\n\s*- mountPath: \/tmp\/k8s-webhook-server\/serving-certs)/{{- if .Values.webhook.enabled }}$1/' \
  "$C/templates/manager/manager.yaml"
grep -q -- '- mountPath: /tmp/k8s-webhook-server/serving-certs' "$C/templates/manager/manager.yaml" ||
  { echo "no webhook-certs mount in the generated Deployment" >&2; exit 1; }
cat > "$C/templates/extras/webhook-server-cert.yaml" <<'YAML'
{{- if and (not .Values.certManager.enabled) .Values.webhook.enabled }}
# Self-managed certificates: the manager's rotator (cert-controller) fills in this Secret (CA and
# serving certificate), and its CA injector puts the CA in both webhook configurations; neither
# creates the Secret.
apiVersion: v1
kind: Secret
metadata:
  labels:
    app.kubernetes.io/managed-by: {{ .Release.Service }}
    app.kubernetes.io/name: {{ include "fencedlock.name" . }}
    helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
    app.kubernetes.io/instance: {{ .Release.Name }}
  name: {{ include "fencedlock.resourceName" (dict "suffix" "webhook-server-cert" "context" $) }}
  namespace: {{ .Release.Namespace }}
type: Opaque
{{- end }}
YAML

mkdir -p "$(dirname "$OUT")"
rm -rf "$OUT.tmp"
cp -r "$C" "$OUT.tmp"
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
echo "generated $OUT" >&2
