#!/usr/bin/env bash
# verify-generated.sh -- fails when committed generated files (CRDs, RBAC, webhook configuration,
# deepcopy) differ from what controller-gen produces now, or dist/chart from what hack/helm-chart.sh
# makes of config/. Leaves the tree unchanged. Env: CONTROLLER_GEN, KUBEBUILDER, KUSTOMIZE.
set -euo pipefail
cd "$(dirname "$0")/.."
CONTROLLER_GEN=${CONTROLLER_GEN:-bin/controller-gen}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

"$CONTROLLER_GEN" rbac:roleName=manager-role crd webhook paths="./..." \
  output:crd:artifacts:config="$tmp/crd" output:rbac:artifacts:config="$tmp/rbac" \
  output:webhook:artifacts:config="$tmp/webhook"
stale=0
check() { # generated committed
  if ! diff -u "$2" "$1" >/dev/null 2>&1; then echo "stale: $2" >&2; stale=1; fi
}
for f in "$tmp"/crd/*.yaml; do check "$f" "config/crd/bases/$(basename "$f")"; done
check "$tmp/rbac/role.yaml" config/rbac/role.yaml
[ ! -f "$tmp/webhook/manifests.yaml" ] || check "$tmp/webhook/manifests.yaml" config/webhook/manifests.yaml

# deepcopy is generated in place: regenerate next to a saved copy, compare, restore.
for f in api/*/zz_generated.deepcopy.go; do cp "$f" "$tmp/$(basename "$(dirname "$f")").orig"; done
"$CONTROLLER_GEN" object:headerFile="hack/boilerplate.go.txt",year=2026 paths="./api/..."
for f in api/*/zz_generated.deepcopy.go; do
  o="$tmp/$(basename "$(dirname "$f")").orig"
  if ! cmp -s "$f" "$o"; then echo "stale: $f" >&2; stale=1; fi
  cp "$o" "$f"
done
# dist/chart: regenerated from config/ next to the committed one (its hand-kept files copied in).
if [ -d dist/chart ]; then
  mkdir -p "$tmp/chart/templates"
  for f in Chart.yaml values.yaml templates/NOTES.txt templates/_helpers.tpl; do
    [ ! -f "dist/chart/$f" ] || cp "dist/chart/$f" "$tmp/chart/$f"
  done
  hack/helm-chart.sh "$tmp/chart" 2> "$tmp/helm-chart.log" || { cat "$tmp/helm-chart.log" >&2; exit 1; }
  if ! diff -ru dist/chart "$tmp/chart" > "$tmp/chart.diff"; then
    echo "stale: dist/chart (run 'make helm-chart' and commit the result)" >&2
    head -40 "$tmp/chart.diff" >&2
    stale=1
  fi
fi
if [ $stale = 1 ]; then
  echo "generated files are stale: run 'make manifests generate' (and 'make helm-chart') and commit the result" >&2
  exit 1
fi
echo "generated files are up to date"
