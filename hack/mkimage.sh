#!/usr/bin/env bash
# mkimage.sh <static-binary> <repo:tag> <out.tar> -- packs one static binary into a single-layer
# docker-archive ("docker save" format) tarball without any image builder: the local cluster has no
# registry and this machine no Docker, so images reach containerd via hack/cluster-load-image.sh.
# The binary becomes /bin/entry (the image's Entrypoint); the image also has /tmp and an /etc/passwd
# with root (0), nonroot (65532, as distroless) and nobody (65534). Run pods with
# `imagePullPolicy: Never` (or IfNotPresent and a tag other than latest).
# Env: IMAGE_ARCH overrides the architecture recorded in the image (default: this machine's);
# IMAGE_ENTRY puts the binary at another absolute path (e.g. /manager, as the Dockerfile does);
# IMAGE_USER sets the image's user (e.g. 65532:65532; numeric, so runAsNonRoot can verify it).
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: $0 <static-binary> <repo:tag> <out.tar>" >&2; exit 2; }
BIN=$1 REF=$2 OUT=$3
[ -f "$BIN" ] || { echo "no such file: $BIN" >&2; exit 1; }
case ${REF##*/} in *:*) ;; *) echo "image reference must carry a tag: $REF" >&2; exit 2 ;; esac

case $(uname -m) in
  x86_64) arch=amd64 ;;
  aarch64|arm64) arch=arm64 ;;
  *) arch=$(uname -m) ;;
esac
ARCH=${IMAGE_ARCH:-$arch}
ENTRY=${IMAGE_ENTRY:-/bin/entry}
USER_=${IMAGE_USER:-}
case $ENTRY in /*) ;; *) echo "IMAGE_ENTRY must be an absolute path: $ENTRY" >&2; exit 2 ;; esac
case $USER_ in "" | [0-9]* ) ;; *) echo "IMAGE_USER must be numeric (uid[:gid]): $USER_" >&2; exit 2 ;; esac

W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/rootfs/bin" "$W/rootfs/etc" "$W/rootfs/tmp" "$W/img"
mkdir -p "$W/rootfs$(dirname "$ENTRY")"
install -m 0755 "$BIN" "$W/rootfs$ENTRY"
chmod 1777 "$W/rootfs/tmp"
printf 'root:x:0:0:root:/:%s\nnonroot:x:65532:65532:nonroot:/:%s\nnobody:x:65534:65534:nobody:/:%s\n' \
  "$ENTRY" "$ENTRY" "$ENTRY" > "$W/rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\nnogroup:x:65534:\n' > "$W/rootfs/etc/group"

# Fixed owner, mtime and order: the same binary always gives the same layer digest.
tar --numeric-owner --owner=0 --group=0 --mtime='2020-01-01 00:00:00Z' --sort=name \
  -C "$W/rootfs" -cf "$W/layer.tar" .
LSHA=$(sha256sum "$W/layer.tar" | cut -d' ' -f1)
mkdir -p "$W/img/$LSHA"
mv "$W/layer.tar" "$W/img/$LSHA/layer.tar"

USERCFG=
[ -z "$USER_" ] || USERCFG="\"User\":\"$USER_\","
cat > "$W/config.json" <<JSON
{"architecture":"$ARCH","os":"linux","created":"2020-01-01T00:00:00Z","config":{$USERCFG"Entrypoint":["$ENTRY"],"Env":["PATH=/bin"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:$LSHA"]},"history":[{"created":"2020-01-01T00:00:00Z","created_by":"hack/mkimage.sh"}]}
JSON
CSHA=$(sha256sum "$W/config.json" | cut -d' ' -f1)
mv "$W/config.json" "$W/img/$CSHA.json"
printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]\n' "$CSHA" "$REF" "$LSHA" > "$W/img/manifest.json"

mkdir -p "$(dirname "$OUT")"
tar --numeric-owner --owner=0 --group=0 --mtime='2020-01-01 00:00:00Z' --sort=name \
  -C "$W/img" -cf "$OUT.tmp" .
mv "$OUT.tmp" "$OUT"
echo "built $OUT ($REF)" >&2
