#!/usr/bin/env bash
# image-tarballs.sh <out-dir> -- builds the manager and the sample workload (cmd/ledger-worker) as
# static binaries and packs each into an image tarball with hack/mkimage.sh: no Docker engine, no
# registry. Writes <out-dir>/manager.tar (tagged $IMG) and <out-dir>/ledger-worker.tar (tagged
# $WORKER_IMG). The manager image is laid out as the Dockerfile's: /manager, user 65532:65532.
# Load them into a node's containerd: hack/cluster-load-image.sh (this repository's node),
# `ctr -n k8s.io images import`, `kind load image-archive`, `minikube image load`, ...
# Env: IMG, WORKER_IMG (defaults as the Makefile's), GOARCH (the image's architecture follows it),
# VERSION (linked into the manager, which reports it: what `make release` sets; unset: "(devel)").
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 <out-dir>" >&2; exit 2; }
OUT=$1
IMG=${IMG:-ghcr.io/fencedlock/fencedlock-manager:dev}
WORKER_IMG=${WORKER_IMG:-ghcr.io/fencedlock/ledger-worker:dev}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
B=$(mktemp -d)
trap 'rm -rf "$B"' EXIT
start=$SECONDS
# One go build for both: the packages they share are compiled once.
(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w${VERSION:+ -X main.version=$VERSION}" -o "$B/" ./cmd/manager ./cmd/ledger-worker)
echo "built the manager and ledger-worker binaries in $((SECONDS - start))s" >&2
[ -z "${GOARCH:-}" ] || export IMAGE_ARCH=$GOARCH
IMAGE_ENTRY=/manager IMAGE_USER=65532:65532 "$ROOT/hack/mkimage.sh" "$B/manager" "$IMG" "$OUT/manager.tar"
IMAGE_USER=65532:65532 "$ROOT/hack/mkimage.sh" "$B/ledger-worker" "$WORKER_IMG" "$OUT/ledger-worker.tar"
