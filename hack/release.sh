#!/usr/bin/env bash
# release.sh <version> [out-dir] -- builds everything a release of fencedlock ships, pinned to
# <version> (vMAJOR.MINOR.PATCH[-PRERELEASE], the git tag), into out-dir (default
# dist/release/<version>), which is replaced only once all of it is built (`make release`):
#   fencedlock-manager_<version>_linux_<arch>.tar     the manager image, $REGISTRY/fencedlock-manager:<version>
#   ledger-worker_<version>_linux_<arch>.tar          the sample workload's image, $REGISTRY/ledger-worker:<version>
#       docker-archive tarballs (hack/image-tarballs.sh), one per arch of IMAGE_ARCHES: load them
#       with `ctr -n k8s.io images import`, `kind load image-archive`, or push them with
#       `skopeo copy docker-archive:<tar> docker://<registry>/...` (docs/operations.md)
#   install.yaml, install-cert-manager.yaml           config/default and config/cert-manager, the manager image pinned
#   samples.yaml                                      config/samples, the ledger-worker image pinned
#   fencedlock-<version without v>.tgz                the Helm chart (dist/chart): version and appVersion set,
#                                                     the image tag defaulting to the appVersion
#   kubectl-fencedlock_<version>_<os>_<arch>.tar.gz   the plugin, its completer and LICENSE, per PLUGIN_PLATFORMS
#   fencedlock.krew.yaml                              the krew manifest (plugins/fencedlock.yaml) with the archives' sha256
#   SHA256SUMS                                        `sha256sum -c SHA256SUMS` checks all of the above
# The binaries report <version> (-X main.version). The same commit and Go toolchain give the same
# bytes: -trimpath, fixed owners and timestamps (2020-01-01, SOURCE_DATE_EPOCH for helm), sorted
# entries, gzip -n. test/release checks a release end to end.
# Env: REGISTRY (ghcr.io/fencedlock), IMAGE_ARCHES ("amd64 arm64"; empty: no images),
# PLUGIN_PLATFORMS ("linux/amd64 linux/arm64 darwin/amd64 darwin/arm64"), KUSTOMIZE, HELM (bin/).
set -euo pipefail
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 <version> [out-dir]   (make release VERSION=v0.1.0)" >&2; exit 2; }
V=$1
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${2:-$ROOT/dist/release/$V}
REGISTRY=${REGISTRY:-ghcr.io/fencedlock}
IMAGE_ARCHES=${IMAGE_ARCHES-amd64 arm64}
PLUGIN_PLATFORMS=${PLUGIN_PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
HELM=${HELM:-$ROOT/bin/helm}
export KUSTOMIZE=${KUSTOMIZE:-$ROOT/bin/kustomize}
EPOCH=1577836800 # 2020-01-01T00:00:00Z, as hack/mkimage.sh

# Semantic Versioning 2.0.0 with the tag's "v", and no build metadata: "+" is not allowed in an image tag.
num='(0|[1-9][0-9]*)'
ident='(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)'
if ! [[ $V =~ ^v$num\.$num\.$num(-$ident(\.$ident)*)?$ ]]; then
  echo "VERSION must be a semantic version with a leading v, vMAJOR.MINOR.PATCH[-PRERELEASE] (v0.1.0," >&2
  echo "v1.2.0-rc.1; no +build metadata, which an image tag cannot carry): got \"$V\"" >&2
  exit 2
fi
[ -x "$HELM" ] || { echo "no helm at $HELM: run make helm" >&2; exit 1; }
[ -x "$KUSTOMIZE" ] || { echo "no kustomize at $KUSTOMIZE: run make kustomize" >&2; exit 1; }
if [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2> /dev/null)" ]; then
  echo "warning: the tree has uncommitted changes: release from the tagged commit" >&2
fi

MANAGER=$REGISTRY/fencedlock-manager:$V
WORKER=$REGISTRY/ledger-worker:$V
W=$(mktemp -d)
mkdir -p "$(dirname "$OUT")"
T=$(mktemp -d "$OUT.tmp.XXXXXX")
trap 'rm -rf "$W" "$T"' EXIT
start=$SECONDS

# pinned <file> <image>: every image the file names is <image>.
pinned() {
  local other
  other=$(grep -E '^\s*(- )?image: ' "$1" | sed -E 's/^\s*(- )?image: *//; s/"//g' | sort -u | grep -vxF "$2" || true)
  [ -z "$other" ] || { echo "$(basename "$1") names other images than $2: $other" >&2; exit 1; }
  grep -qE "image: \"?$2\"?\$" "$1" || { echo "$(basename "$1") does not name $2" >&2; exit 1; }
}

images() {
  local arch
  for arch in $IMAGE_ARCHES; do
    GOARCH=$arch VERSION=$V IMG=$MANAGER WORKER_IMG=$WORKER "$ROOT/hack/image-tarballs.sh" "$W/images-$arch"
    mv "$W/images-$arch/manager.tar" "$T/fencedlock-manager_${V}_linux_$arch.tar"
    mv "$W/images-$arch/ledger-worker.tar" "$T/ledger-worker_${V}_linux_$arch.tar"
  done
}

manifests() {
  "$ROOT/hack/render-overlay.sh" "$ROOT/config/default" Deployment "$MANAGER" > "$T/install.yaml"
  "$ROOT/hack/render-overlay.sh" "$ROOT/config/cert-manager" Deployment "$MANAGER" > "$T/install-cert-manager.yaml"
  "$ROOT/hack/render-overlay.sh" "$ROOT/config/samples" Job "$WORKER" > "$T/samples.yaml"
  pinned "$T/install.yaml" "$MANAGER"
  pinned "$T/install-cert-manager.yaml" "$MANAGER"
  pinned "$T/samples.yaml" "$WORKER"
}

chart() {
  cp -r "$ROOT/dist/chart" "$W/fencedlock"
  SOURCE_DATE_EPOCH=$EPOCH "$HELM" package "$W/fencedlock" --version "${V#v}" --app-version "$V" -d "$T" > /dev/null
  "$HELM" template fencedlock "$T/fencedlock-${V#v}.tgz" -n fencedlock-system > "$W/chart.yaml"
  pinned "$W/chart.yaml" "$MANAGER"
}

# plugin_archive <os/arch>: the plugin's archive for one platform.
plugin_archive() {
  local os=${1%/*} arch=${1#*/}
  local d=$W/plugin-${os}_$arch
  (cd "$ROOT" && CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags="-s -w -X main.version=$V" \
    -o "$d/kubectl-fencedlock" ./cmd/kubectl-fencedlock)
  install -m 0755 "$ROOT/cmd/kubectl-fencedlock/kubectl_complete-fencedlock" "$d/"
  install -m 0644 "$ROOT/LICENSE" "$d/"
  chmod 0755 "$d/kubectl-fencedlock"
  tar --sort=name --numeric-owner --owner=0 --group=0 --mtime="@$EPOCH" -C "$d" -cf - \
    kubectl-fencedlock kubectl_complete-fencedlock LICENSE | gzip -n -9 > "$T/kubectl-fencedlock_${V}_${os}_$arch.tar.gz"
}

plugin() {
  local p pids=()
  # In parallel: once the packages are compiled (cached), each build is mostly its one-threaded link.
  for p in $PLUGIN_PLATFORMS; do
    plugin_archive "$p" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  (cd "$ROOT" && go run ./hack/tools/krewmanifest -template plugins/fencedlock.yaml -tag "$V" -archives "$T") \
    > "$T/fencedlock.krew.yaml"
}

step() { # step <name> <function>
  local s=$SECONDS
  "$2"
  echo "release $V: $1 in $((SECONDS - s))s" >&2
}
[ -z "$IMAGE_ARCHES" ] || step "images ($IMAGE_ARCHES)" images
step manifests manifests
step chart chart
step "plugin ($PLUGIN_PLATFORMS)" plugin
(cd "$T" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | LC_ALL=C sort | xargs sha256sum > SHA256SUMS)

rm -rf "$OUT"
mv "$T" "$OUT"
chmod 0755 "$OUT"
echo "release $V in $((SECONDS - start))s: $OUT" >&2
(cd "$OUT" && ls -l | tail -n +2 >&2)
