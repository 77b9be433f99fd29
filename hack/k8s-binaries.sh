#!/usr/bin/env bash
# k8s-binaries.sh [component...] -- builds pinned Kubernetes and etcd binaries from the Go module
# proxy (no release downloads are reachable here) and caches them outside the clone.
# Prints the bin directory on stdout (use it as KUBEBUILDER_ASSETS); progress goes to stderr.
# Components: etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl
# (default: etcd kube-apiserver, what envtest needs). Only missing binaries are built: etcd and the
# Kubernetes components at the same time, since each build leaves a core idle much of the time
# (module downloads, resolving the module graph, linking).
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.7.3}
CACHE=${FENCEDLOCK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fencedlock}
BIN=$CACHE/k8s-$K8S_VERSION/bin
log() { echo "[k8s-binaries] $*" >&2; }
# quietly LOG CMD...: runs a module command (go get, go mod tidy: dozens of "go: added" lines)
# with its output in LOG, shown only if it fails.
quietly() {
  local out=$1; shift
  "$@" >"$out" 2>&1 || { cat "$out" >&2; log "failed: $* (output above, also in $out)"; return 1; }
}
# with_progress WHAT CMD...: runs a long build, printing a line every 30 s so nobody wonders if it
# hangs.
with_progress() {
  local what=$1; shift
  local start=$SECONDS
  "$@" &
  local pid=$!
  while kill -0 $pid 2>/dev/null; do
    for _ in $(seq 1 30); do kill -0 $pid 2>/dev/null || break; sleep 1; done
    kill -0 $pid 2>/dev/null && log "  ... still building $what ($((SECONDS - start))s)"
  done
  wait $pid
}

components=("$@")
[ ${#components[@]} -gt 0 ] || components=(etcd kube-apiserver)
mkdir -p "$BIN"

missing_k8s=()
need_etcd=0
for c in "${components[@]}"; do
  case $c in
    etcd) [ -x "$BIN/etcd" ] || need_etcd=1 ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kubectl)
      [ -x "$BIN/$c" ] || missing_k8s+=("$c") ;;
    *) echo "unknown component $c" >&2; exit 2 ;;
  esac
done

export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=${GOTOOLCHAIN:-local}

build_etcd() {
  local M=$CACHE/etcd-$ETCD_VERSION-module
  mkdir -p "$M"
  cd "$M"
  [ -f go.mod ] || go mod init etcdbuild >/dev/null 2>&1
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > tools.go
  quietly "$M/get.log" go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  quietly "$M/tidy.log" go mod tidy
  with_progress etcd go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3
  mv "$BIN/etcd.tmp" "$BIN/etcd"
  log "etcd $ETCD_VERSION built"
}

build_k8s() {
  local M=$CACHE/k8s-$K8S_VERSION-module
  local SV=v0.${K8S_VERSION#v1.}
  mkdir -p "$M"
  cd "$M"
  if [ ! -f .ready ]; then
    [ -f go.mod ] || go mod init kbuild >/dev/null 2>&1
    cat > tools.go <<'EOT'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
EOT
    # k8s.io/kubernetes replaces every staging module with ./staging/...; mirror that with proxy versions.
    local GOMOD
    GOMOD=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    for m in $(grep -oE '^\s*k8s.io/[a-z0-9-]+ => ./staging' "$GOMOD" | awk '{print $1}'); do
      go mod edit "-replace=$m=$m@$SV"
    done
    go mod edit "-require=k8s.io/kubernetes@$K8S_VERSION"
    with_progress "the module graph" quietly "$M/tidy.log" go mod tidy
    touch .ready
  fi
  local MINOR=${K8S_VERSION#v1.}; MINOR=${MINOR%%.*}
  # Without version ldflags the binaries report v0.0.0-master, which kubectl cannot parse.
  local LD="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    LD="$LD -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$MINOR -X $p.gitTreeState=clean"
    LD="$LD -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.buildDate=2026-01-01T00:00:00Z"
  done
  local pkgs=() c
  for c in "${missing_k8s[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  local T
  T=$(mktemp -d "$BIN/.build.XXXX")
  with_progress "${missing_k8s[*]}" go build -trimpath -ldflags "$LD" -o "$T/" "${pkgs[@]}"
  mv "$T"/* "$BIN/" && rmdir "$T"
  log "${missing_k8s[*]} $K8S_VERSION built"
}

pids=()
if [ $need_etcd = 1 ]; then
  log "building etcd $ETCD_VERSION (about 2 minutes, once)"
  ( build_etcd ) & pids+=($!)
fi
if [ ${#missing_k8s[@]} -gt 0 ]; then
  log "building ${missing_k8s[*]} $K8S_VERSION from the Go module proxy (about 8 minutes on 2 cores, once)"
  ( build_k8s ) & pids+=($!)
fi
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done
[ $failed = 0 ] || { log "build failed"; exit 1; }
for c in "${components[@]}"; do [ -x "$BIN/$c" ] || { echo "missing $BIN/$c after build" >&2; exit 1; }; done
echo "$BIN"
