#!/usr/bin/env bash
# retag-image.sh <in.tar> <repo:tag> <out.tar> -- the same image (layers and config unchanged, so
# the same image ID) under another name: rewrites RepoTags in a docker-archive tarball made by
# hack/mkimage.sh (or `docker save`). Load it with hack/cluster-load-image.sh; the end-to-end suite
# uses it to change the manager's image in a running Deployment without a second build.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 <in.tar> <repo:tag> <out.tar>" >&2; exit 2; }
IN=$1 REF=$2 OUT=$3
[ -f "$IN" ] || { echo "no such file: $IN" >&2; exit 1; }
case ${REF##*/} in *:*) ;; *) echo "image reference must carry a tag: $REF" >&2; exit 2 ;; esac
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
tar -C "$W" -xf "$IN"
[ -f "$W/manifest.json" ] || { echo "$IN is not a docker-archive tarball (no manifest.json)" >&2; exit 1; }
# One image per tarball, as mkimage.sh writes: replace its tags with REF.
sed -E -i 's/"RepoTags":\[[^]]*\]/"RepoTags":["'"${REF//\//\\/}"'"]/' "$W/manifest.json"
grep -q "\"RepoTags\":\[\"$REF\"\]" "$W/manifest.json" || { echo "could not retag $IN" >&2; exit 1; }
rm -f "$W/repositories"
mkdir -p "$(dirname "$OUT")"
tar --numeric-owner --owner=0 --group=0 --mtime='2020-01-01 00:00:00Z' --sort=name -C "$W" -cf "$OUT.tmp" .
mv "$OUT.tmp" "$OUT"
echo "retagged $IN as $REF: $OUT" >&2
