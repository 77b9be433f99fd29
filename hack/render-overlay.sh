#!/usr/bin/env bash
# render-overlay.sh <kustomize-dir> <kind> <image> [pull-policy] -- renders a kustomization with
# the first container of every <kind> set to <image> (and, if given, imagePullPolicy), on stdout,
# through a throwaway overlay: no tracked file is edited (unlike `kustomize edit set image`).
#   hack/render-overlay.sh config/default Deployment localhost/fencedlock/manager:dev IfNotPresent
#   hack/render-overlay.sh config/samples Job localhost/fencedlock/ledger-worker:dev IfNotPresent
# Used by `make build-installer` and `make build-samples`. Env: KUSTOMIZE (default bin/kustomize).
set -euo pipefail
[ $# -ge 3 ] && [ $# -le 4 ] || { echo "usage: $0 <kustomize-dir> <kind> <image> [pull-policy]" >&2; exit 2; }
DIR=$1 KIND=$2 IMAGE=$3 POLICY=${4:-}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KUSTOMIZE=${KUSTOMIZE:-$ROOT/bin/kustomize}
[ -d "$DIR" ] || { echo "no such directory: $DIR" >&2; exit 1; }
[ -x "$KUSTOMIZE" ] || { echo "no kustomize at $KUSTOMIZE: run make kustomize" >&2; exit 1; }
case $POLICY in "" | Always | IfNotPresent | Never) ;; *) echo "pull policy must be Always, IfNotPresent or Never: $POLICY" >&2; exit 2 ;; esac

# Inside the repository: kustomize takes resources only by relative path.
mkdir -p "$ROOT/bin"
T=$(mktemp -d "$ROOT/bin/.overlay.XXXXXX")
trap 'rm -rf "$T"' EXIT
{
  echo "resources:"
  echo "- $(realpath --relative-to="$T" "$DIR")"
  echo "patches:"
  echo "- target:"
  echo "    kind: $KIND"
  echo "  patch: |-"
  echo "    - op: replace"
  echo "      path: /spec/template/spec/containers/0/image"
  echo "      value: $IMAGE"
  if [ -n "$POLICY" ]; then
    echo "    - op: add"
    echo "      path: /spec/template/spec/containers/0/imagePullPolicy"
    echo "      value: $POLICY"
  fi
} > "$T/kustomization.yaml"
"$KUSTOMIZE" build "$T"
