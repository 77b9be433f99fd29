#!/usr/bin/env bash
# cluster-load-image.sh <tarball>... -- imports docker-archive tarballs (from hack/mkimage.sh or
# `docker save`) into the containerd of the node started by `hack/cluster-up.sh --node`, in the
# k8s.io namespace the kubelet uses. Pods then run them with `imagePullPolicy: Never`; a name
# without a registry is stored as docker.io/<name>, which is what the kubelet looks up too.
# Needs root (containerd's socket). Env: CLUSTER_DIR (default /tmp/fencedlock-cluster).
set -euo pipefail

[ $# -ge 1 ] || { echo "usage: $0 <tarball>..." >&2; exit 2; }
CLUSTER_DIR=${CLUSTER_DIR:-/tmp/fencedlock-cluster}
# Must match hack/cluster-up.sh.
SOCK=/run/fencedlock-containerd/containerd.sock

if [ ! -f "$CLUSTER_DIR/containerd.pid" ] || ! kill -0 "$(<"$CLUSTER_DIR/containerd.pid")" 2> /dev/null ||
  [ ! -S "$SOCK" ]; then
  echo "no node running for $CLUSTER_DIR: run hack/cluster-up.sh --node first" >&2
  exit 1
fi
for tar in "$@"; do
  [ -f "$tar" ] || { echo "no such file: $tar" >&2; exit 1; }
  # ctr prints "unpacking <name> (<digest>)...done" for every image it imported.
  ctr -a "$SOCK" -n k8s.io images import "$tar" >&2
done
