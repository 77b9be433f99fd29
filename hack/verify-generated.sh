#!/usr/bin/env bash
# verify-generated.sh -- fails when committed generated files (CRDs, RBAC, webhook configuration,
# deepcopy) differ from what controller-gen produces now. Leaves the tree unchanged.
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
if [ $stale = 1 ]; then
  echo "generated files are stale: run 'make manifests generate' and commit the result" >&2
  exit 1
fi
echo "generated files are up to date"
