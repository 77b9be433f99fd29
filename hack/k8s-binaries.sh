#!/usr/bin/env bash
# k8s-binaries.sh [component...] -- builds pinned Kubernetes and etcd binaries from the Go module
# proxy (no release downloads are reachable here) and caches them outside the clone.
# Prints the bin directory on stdout (use it as KUBEBUILDER_ASSETS); progress goes to stderr.
# Components: etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl
# (default: etcd kube-apiserver, what envtest needs). Only missing binaries are built, all of them by
# one `go build` in one module: etcd shares 460 of its 565 packages with kube-apiserver and kubectl
# (gRPC, protobuf, OpenTelemetry, the etcd client), which two builds would compile twice.
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

missing=()
for c in "${components[@]}"; do
  case $c in
    etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kubectl)
      [ -x "$BIN/$c" ] || missing+=("$c") ;;
    *) echo "unknown component $c" >&2; exit 2 ;;
  esac
done

export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=${GOTOOLCHAIN:-local}

# prepare_module: one module requiring k8s.io/kubernetes and etcd's server, so that one build
# resolves one version of every shared dependency. Minimal version selection picks the higher of
# the two pins, so kube-apiserver links etcd's client 3.7.3 (not 3.7.0), grpc 1.83 (not 1.82),
# OpenTelemetry 1.45 (not 1.44) and a few minors newer golang.org/x modules; the tests run on it.
prepare_module() {
  local M=$1
  local SV=v0.${K8S_VERSION#v1.}
  local want="$K8S_VERSION $ETCD_VERSION"
  [ "$(cat "$M/.ready" 2>/dev/null)" = "$want" ] && return 0
  mkdir -p "$M"
  cd "$M"
  rm -f go.mod go.sum .ready
  go mod init kbuild >/dev/null 2>&1
  cat > tools.go <<'EOT'
//go:build tools

package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
EOT
  # k8s.io/kubernetes replaces every staging module with ./staging/...; mirror that with proxy versions.
  local GOMOD m
  GOMOD=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  for m in $(grep -oE '^\s*k8s.io/[a-z0-9-]+ => ./staging' "$GOMOD" | awk '{print $1}'); do
    go mod edit "-replace=$m=$m@$SV"
  done
  go mod edit "-require=k8s.io/kubernetes@$K8S_VERSION"
  quietly "$M/get.log" go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  with_progress "the module graph" quietly "$M/tidy.log" go mod tidy
  echo "$want" > .ready
}

build() {
  local M=$CACHE/k8s-$K8S_VERSION-module
  prepare_module "$M"
  cd "$M"
  local MINOR=${K8S_VERSION#v1.}; MINOR=${MINOR%%.*}
  # Without version ldflags the binaries report v0.0.0-master, which kubectl cannot parse.
  local LD="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    LD="$LD -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$MINOR -X $p.gitTreeState=clean"
    LD="$LD -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.buildDate=2026-01-01T00:00:00Z"
  done
  local pkgs=() c
  for c in "${missing[@]}"; do
    case $c in
      etcd) pkgs+=(go.etcd.io/etcd/server/v3) ;;
      *) pkgs+=("k8s.io/kubernetes/cmd/$c") ;;
    esac
  done
  local T
  T=$(mktemp -d "$BIN/.build.XXXX")
  # -dwarf=false: the linker drops debug info anyway (-w); not generating it saves compile time and
  # changes no instruction.
  with_progress "${missing[*]}" go build -trimpath -gcflags=all=-dwarf=false -ldflags "$LD" -o "$T/" "${pkgs[@]}"
  # go names etcd's binary after its package path, go.etcd.io/etcd/server/v3.
  [ ! -e "$T/server" ] || mv "$T/server" "$T/etcd"
  mv "$T"/* "$BIN/" && rmdir "$T"
  log "${missing[*]} built (Kubernetes $K8S_VERSION, etcd $ETCD_VERSION)"
}

if [ ${#missing[@]} -gt 0 ]; then
  log "building ${missing[*]} from the Go module proxy (Kubernetes $K8S_VERSION, etcd $ETCD_VERSION; once: on 2 cores kube-apiserver, kubectl and etcd took about 14 minutes, the node's parts after them 3 to 11 more)"
  ( build ) || { log "build failed"; exit 1; }
fi
for c in "${components[@]}"; do [ -x "$BIN/$c" ] || { echo "missing $BIN/$c after build" >&2; exit 1; }; done
echo "$BIN"
